"""Registry: schema validation names file and field; LOCK makes published files immutable; lookup rules."""

import hashlib
import shutil
from pathlib import Path

import pytest

from numstd import registry
from numstd.errors import AmbiguousStandard, DataIntegrityError, SchemaError, StandardNotFound

GOOD = '''schema = 1
id = "NS-MATMUL-TEST"
version = 1
status = "active"
op = "matmul"
title = "test"
default = true

[formats]
inputs = ["bfloat16", "bfloat16"]
accumulate = "float32"
output = "bfloat16"

[model]
error = "lam * u_acc * sqrt(K) * absdot"
rho = 1.0
ftz = true
constants = { lam = 1.0 }

[criteria]
bias_tau = 0.05

[rationale]
text = "because"

[provenance]
method = "by hand"
'''


def _root(tmp_path, files):
    root = tmp_path / "standards"
    lock = []
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        if 'status = "draft"' not in text:
            lock.append(f"{hashlib.sha256(text.encode()).hexdigest()}  {rel}")
    (root / "LOCK").write_text("\n".join(lock) + "\n")
    registry._cache.clear()
    return root


def test_good_file_loads_and_cites_its_hash(tmp_path):
    root = _root(tmp_path, {"matmul/NS-MATMUL-TEST@1.toml": GOOD})
    s = registry.get_standard("NS-MATMUL-TEST@1", root=root)
    assert s.key == "NS-MATMUL-TEST@1"
    assert s.citation == f"NS-MATMUL-TEST@1 (sha256:{hashlib.sha256(GOOD.encode()).hexdigest()[:12]})"
    assert registry.get_standard("ns-matmul-test", root=root) is s
    assert registry.find_standard("matmul", ["bfloat16", "bfloat16"], "bfloat16", root=root) is s


@pytest.mark.parametrize("old, new, fragment", [
    ('title = "test"\n', 'title = "test"\ncolour = "red"\n', "unknown key 'colour'"),
    ('op = "matmul"\n', "", "missing required field 'op'"),
    ('"lam * u_acc * sqrt(K) * absdot"', '"lam * u_acc * sqrt(K) * absdott"', "unknown name 'absdott'"),
    ('output = "bfloat16"', 'output = "bfloat17"', "unknown format"),
    ('status = "active"', 'status = "final"', "status"),
    ('rho = 1.0', 'rho = "one"', "rho"),
    ('bias_tau = 0.05', 'bias_tau = "x"', "bias_tau must be float"),
    ('id = "NS-MATMUL-TEST"', 'id = "ns matmul"', "id"),
])
def test_schema_errors_name_the_file_and_field(tmp_path, old, new, fragment):
    text = GOOD.replace(old, new)
    assert text != GOOD
    root = _root(tmp_path, {"matmul/NS-MATMUL-TEST@1.toml": text})
    with pytest.raises(SchemaError) as ei:
        registry.get_standard("NS-MATMUL-TEST@1", root=root)
    assert fragment in str(ei.value)
    assert "NS-MATMUL-TEST@1.toml" in str(ei.value)


def test_editing_a_published_file_is_detected(tmp_path):
    root = _root(tmp_path, {"matmul/NS-MATMUL-TEST@1.toml": GOOD})
    registry.load_registry(root)
    (root / "matmul/NS-MATMUL-TEST@1.toml").write_text(GOOD.replace("lam = 1.0", "lam = 1.5"))
    registry._cache.clear()
    with pytest.raises(DataIntegrityError, match="immutable"):
        registry.get_standard("NS-MATMUL-TEST@1", root=root)


def test_removing_a_published_file_is_detected(tmp_path):
    root = _root(tmp_path, {"matmul/NS-MATMUL-TEST@1.toml": GOOD})
    (root / "matmul/NS-MATMUL-TEST@1.toml").unlink()
    with pytest.raises(DataIntegrityError, match="resolvable"):
        registry.get_standard("NS-MATMUL-TEST@1", root=root)


def test_shipped_standards_match_lock_and_a_tampered_copy_fails(tmp_path):
    from importlib import resources

    src = Path(str(resources.files("numstd.standards")))
    registry._cache.clear()
    stds = registry.list_standards()
    dst = tmp_path / "standards"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    registry._cache.clear()
    assert len(registry.list_standards(root=dst)) == len(stds)
    published = [s for s in stds if s.status != "draft"]
    if not published:
        pytest.skip("no published standards yet")
    victim = dst / published[0].path.split("standards/", 1)[1]
    victim.write_text(victim.read_text().replace("title = ", "title = \"edited\"\n#", 1))
    registry._cache.clear()
    with pytest.raises(DataIntegrityError, match=published[0].key):
        registry.get_standard(published[0].key, root=dst)
    with pytest.raises(DataIntegrityError, match=published[0].key):
        registry.find_standard(published[0].op, root=dst)
    others = [s for s in stds if s.op != published[0].op]  # every other standard stays usable
    assert [registry.get_standard(s.key, root=dst).sha256 for s in others] == [s.sha256 for s in others]
    registry._cache.clear()


def test_versions_selector_and_defaults(tmp_path):
    v2 = GOOD.replace("version = 1", 'version = 2\nsupersedes = "NS-MATMUL-TEST@1"').replace("lam = 1.0", "lam = 2.0")
    tf = (GOOD.replace("NS-MATMUL-TEST", "NS-MATMUL-TESTSEL").replace("default = true", "default = false")
          .replace('title = "test"', 'title = "test"\nselector = { allow_tf32 = true }'))
    other = GOOD.replace("NS-MATMUL-TEST", "NS-MATMUL-OTHER")
    root = _root(tmp_path, {"matmul/NS-MATMUL-TEST@1.toml": GOOD, "matmul/NS-MATMUL-TEST@2.toml": v2,
                            "matmul/NS-MATMUL-TESTSEL@1.toml": tf})
    assert registry.get_standard("NS-MATMUL-TEST", root=root).version == 2
    assert registry.get_standard("NS-MATMUL-TEST@1", root=root).model.constants["lam"] == 1.0  # still resolvable
    assert registry.find_standard("matmul", "bfloat16", "bfloat16", root=root).key == "NS-MATMUL-TEST@2"
    assert registry.find_standard("matmul", "bfloat16", "bfloat16", root=root, allow_tf32=True).key == "NS-MATMUL-TESTSEL@1"
    assert registry.find_standard("matmul", "bfloat16", "bfloat16", root=root, allow_tf32=False).key == "NS-MATMUL-TEST@2"
    with pytest.raises(StandardNotFound, match="Existing for matmul"):
        registry.find_standard("matmul", "float16", "float16", root=root)
    with pytest.raises(StandardNotFound, match="did you mean"):
        registry.get_standard("NS-MATMUL-TSET@1", root=root)
    root2 = _root(tmp_path / "b", {"matmul/NS-MATMUL-TEST@1.toml": GOOD,
                                   "matmul/NS-MATMUL-OTHER@1.toml": other})
    with pytest.raises(AmbiguousStandard, match="NS-MATMUL-OTHER@1"):
        registry.find_standard("matmul", "bfloat16", "bfloat16", root=root2)
    registry._cache.clear()
