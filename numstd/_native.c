/* numstd._native: compiled loops of numstd (optional: numstd.native loads it; without it numpy
 * does the same work, bit for bit).
 *
 * judge: the per-element pass of numstd.criteria.Judge.add, fused into one loop.
 * spacing: ulp(r) of float64 values in a format (numstd.ulp._spacing).
 * model_bound: B_i = E_i + rho ulp(|r_i| + E_i) (+ smallest normal) + reference error, in one pass
 *   (numstd.models.ErrorModel.bound).
 * finish_bound, dot_bound: the last passes of a reference's bound (numstd.reference._finish_bound,
 *   numstd.reference.contraction.dot), one pass each.
 * halving_rows: row sums by the balanced tree of numstd.reference.summation.halving_sum.
 * hist_add: the fine |ULP error| histogram of numstd.distribution.DistributionAccumulator.add.
 * pool_enter / pool_exit: a numpy data allocator that keeps freed blocks for reuse while a check
 *   runs (numstd.native.pool).
 *
 * The numpy path (numstd/criteria.py, numstd/distribution.py) is the specification; this file
 * computes the same IEEE double operations in the same order, so the totals are bit-identical
 * (tests/test_native.py compares them on adversarial chunks).  Build flags matter:
 * setup.py compiles with -ffp-contract=off (no fused multiply-add: a*b+c must round twice, as in
 * numpy) and without -ffast-math (no reassociation of the halving trees).
 *
 * One call judges one chunk of n elements, in C order (the output a as float64, float32 or bfloat16,
 * widened exactly; everything else float64):
 *   - skip the element (record its position) unless a is finite and |r| < overflow, where
 *     overflow is the smallest magnitude that rounds to a non-finite value of the output format
 *     (numstd.criteria._overflow_threshold); Python handles skipped elements (specials);
 *   - norm = |a - r| / b (0/0 -> 0, x/NaN -> inf); count norm > 1, keep the maximum and the
 *     positions of the WORST_K largest (ties: the earlier position);
 *   - e = (a - r) / u  (u = ulp(r) in the output format, from r's exponent bits: a power of
 *     two, so exact); when may_spill
 *     and e is not finite, e = a/u - r/u;
 *   - |e| goes to the histogram (bin ceil(16 log2 |e|), decided exactly on the bits) and the
 *     stream of |e| (sums over fixed blocks of BLOCK values by a halving tree);
 *   - where |r| >= smallest_normal and (no mask or epre <= kappa*u): s = sign(r)*e (sign bit
 *     xor) and s*s go to the signed streams, and the bits of a to the distinct-value bitmap (packed:
 *     bit h & 7 of byte h >> 3 for the hash h; numpy's path keeps one bool per hash).
 *   - with rows = (length, first, urel, sums, kept, dsums) (the row_bias criterion,
 *     numstd.criteria.Judge._add_rows is the specification): each element with a finite output
 *     and a finite nonzero reference (|r| < overflow) gives q = rint(2^30 clip(sign(r) (a - r) / b,
 *     -1, 1)) (0/0 -> 0) and, when urel >= 0, dq = rint(2^30 clip(|r| urel / b, 0, 1)) (NaN -> 0);
 *     the other elements give 0 and are not kept.  The chunk is cut into segments [0, first)
 *     (none when first = 0; all n when first >= n), then runs of length elements (the last one
 *     possibly shorter): per segment the integer sums of q and dq and the count of kept elements go
 *     to sums, dsums and kept (int64, exact).
 * The GIL is released for the loop.  judge_run (below) computes exactly this in two passes over
 * groups of 256 elements, the first of them vectorized.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
#ifdef NUMSTD_NUMPY_POOL
#define NPY_NO_DEPRECATED_API NPY_1_22_API_VERSION
#define NPY_TARGET_VERSION NPY_1_22_API_VERSION
#include <numpy/arrayobject.h>
#endif
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#define BLOCK 1024
#define WORST_K 10
#define DISTINCT_BITS 20
#define BINS_PER_OCTAVE 16
#define LO_OCT 30
#define HI_OCT 80
#define NBINS ((LO_OCT + HI_OCT) * BINS_PER_OCTAVE + 2)
#define SIGN_BIT 0x8000000000000000ULL
#define FRAC_MASK 0x000FFFFFFFFFFFFFULL

/* The histogram bin of |e| = (1 + f 2^-52) 2^E is 16E when f = 0, else 16E + 1 + #{j : f > N_j}
 * with N_j the fraction just below 2^(j/16), j = 1..15 (numstd.distribution._fraction_thresholds,
 * passed in by set_thresholds).  The count comes from the top 8 bits of f: consecutive N_j are more
 * than 2^47 apart, so a bucket of 2^44 fractions holds at most one of them, and
 * #{j : f > N_j} = below[f >> 44] + (f > inside[f >> 44]) (inside = UINT64_MAX for none). */
static uint8_t below[256];
static uint64_t inside[256];
static int thresholds_set = 0;
/* the same tables as 64-bit lanes for bins_avx2 (inside64 = 2^52, above every fraction, for none) */
static int64_t below64[256], inside64[256];
/* bins_avx512's table: 32 buckets of 2^47 fractions (consecutive N_j are more than 2^47 apart, so a
 * bucket holds at most one), entry = the threshold inside the bucket (2^52 for none) | below << 56 */
static int64_t packed32[32];
static int packed32_ok = 0;

static inline uint64_t bits_of(double x) { uint64_t b; memcpy(&b, &x, 8); return b; }
static inline double double_of(uint64_t b) { double x; memcpy(&x, &b, 8); return x; }
static inline float float_of(uint32_t b) { float x; memcpy(&x, &b, 4); return x; }  /* bfloat16: the top half */

#define EXP_BITS 0x7FF0000000000000ULL

/* the halving tree over buf[0 .. width) (width a power of two), in place: a[i] = a[i] + a[i + h] for
 * h = width/2 .. 1; the sum ends in buf[0] (numpy's a[:h] + a[h:], the same additions in order) */
static inline void halve(double *buf, Py_ssize_t width) {
    for (Py_ssize_t h = width / 2; h >= 1; h /= 2)
        for (Py_ssize_t i = 0; i < h; i++) buf[i] = buf[i] + buf[i + h];
}

static inline void tree(double *buf) { halve(buf, BLOCK); }

/* ulp(r) in a format from the exponent bits of r: max(2^floor(log2|r|) * scale, lo), NaN for
 * non-finite r; scale = 2^(1-p), lo = 2^(emin-p+1) (numstd.ulp._spacing: the same exact operations) */
static inline double spacing_of(double r, double scale, double lo) {
    uint64_t e = bits_of(r) & EXP_BITS;
    double x = double_of(e) * scale;
    x = x > lo ? x : lo;
    return e == EXP_BITS ? NAN : x;
}

/* B_i = ((E_i + rho ulp(|r_i| + E_i)) [+ smallest normal]) + ref error: the bound of
 * numstd.models.ErrorModel.bound (model_bound and model_eval) */
static inline double bound_of(double e, double absref, double rf, double rho, int add_normal, double sn,
                              double scale, double lo) {
    double b = e + rho * spacing_of(absref + e, scale, lo);
    if (add_normal) b = b + sn;
    return b + rf;
}

static inline Py_ssize_t bin_of(double ae) {
    if (ae == 0.0) return 0;
    uint64_t bits = bits_of(ae);
    int64_t ex = (int64_t)(bits >> 52) - 1023;
    uint64_t frac = bits & FRAC_MASK;
    int64_t k;
    if (ex < -LO_OCT - 1) {
        k = -LO_OCT * BINS_PER_OCTAVE;  /* far below the first bin (subnormals too): clipped */
    } else {
        unsigned t = (unsigned)(frac >> 44);
        k = (int64_t)BINS_PER_OCTAVE * ex + (frac != 0) + below[t] + (frac > inside[t]);
        if (k < -LO_OCT * BINS_PER_OCTAVE) k = -LO_OCT * BINS_PER_OCTAVE;
        if (k > HI_OCT * BINS_PER_OCTAVE) k = HI_OCT * BINS_PER_OCTAVE;
    }
    return (Py_ssize_t)(k + LO_OCT * BINS_PER_OCTAVE + 1);
}

static PyObject *set_thresholds(PyObject *self, PyObject *args) {
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "O", &seq)) return NULL;
    PyObject *fast = PySequence_Fast(seq, "thresholds must be a sequence");
    if (!fast) return NULL;
    if (PySequence_Fast_GET_SIZE(fast) != BINS_PER_OCTAVE - 1) {
        Py_DECREF(fast);
        PyErr_SetString(PyExc_ValueError, "need 15 thresholds");
        return NULL;
    }
    uint64_t th[BINS_PER_OCTAVE - 1];
    for (int j = 0; j < BINS_PER_OCTAVE - 1; j++) {
        unsigned long long v = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(fast, j));
        if (PyErr_Occurred()) { Py_DECREF(fast); return NULL; }
        th[j] = (uint64_t)v;
        if (v > FRAC_MASK || (j && th[j] - th[j - 1] <= (1ULL << 44))) {
            Py_DECREF(fast);
            PyErr_SetString(PyExc_ValueError, "thresholds must be increasing 52-bit fractions more than 2^44 apart");
            return NULL;
        }
    }
    Py_DECREF(fast);
    for (unsigned t = 0; t < 256; t++) {
        uint64_t lo = (uint64_t)t << 44, hi = lo + (1ULL << 44);
        below[t] = 0;
        inside[t] = UINT64_MAX;
        for (int j = 0; j < BINS_PER_OCTAVE - 1; j++) {
            if (th[j] < lo) below[t]++;
            else if (th[j] < hi) inside[t] = th[j];
        }
        below64[t] = below[t];
        inside64[t] = inside[t] == UINT64_MAX ? (int64_t)1 << 52 : (int64_t)inside[t];
    }
    packed32_ok = 1;
    for (unsigned t = 0; t < 32; t++) {
        uint64_t lo = (uint64_t)t << 47, hi = lo + (1ULL << 47), in = 1ULL << 52;
        int64_t nb = 0, nin = 0;
        for (int j = 0; j < BINS_PER_OCTAVE - 1; j++) {
            if (th[j] < lo) nb++;
            else if (th[j] < hi) { in = th[j]; nin++; }
        }
        if (nin > 1) packed32_ok = 0;  /* (not for these thresholds: then bins_avx512 is not used) */
        packed32[t] = (int64_t)in | nb << 56;
    }
    thresholds_set = 1;
    Py_RETURN_NONE;
}

/* a read-only C-contiguous float64 buffer of n elements, or of 1 when scalar_ok (broadcast) */
static int get_f64(PyObject *obj, Py_buffer *view, Py_ssize_t n, const char *name, int scalar_ok) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->len != 8 * n && !(scalar_ok && view->len == 8)) {
        PyErr_Format(PyExc_ValueError, "numstd._native.judge: %s has %zd bytes, expected %zd", name, view->len, 8 * n);
        PyBuffer_Release(view);
        view->obj = NULL;
        return -1;
    }
    return 0;
}

/* bins_avx2: bin_of of m values (m a multiple of 4), four at a time with AVX2: the same integer
 * formula on the bits, 16 E + (f != 0) + below[t] + (f > inside[t]), clipped, 0 for 0 (the
 * subnormals and values below the first bin land on the clip as in bin_of; inf on the top clip).
 * Used where the CPU has AVX2 (checked at run time); the judge is ~0.5-0.9 ns per element faster. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(_MSC_VER)
#include <immintrin.h>
#define HAVE_BINS_AVX2 1
__attribute__((target("avx2"))) static void bins_avx2(const double *ae, int m, int64_t *out) {
    const __m256i fracmask = _mm256_set1_epi64x((long long)FRAC_MASK), zero = _mm256_setzero_si256();
    const __m256i base = _mm256_set1_epi64x(1 - (long long)BINS_PER_OCTAVE * 1023);
    const __m256i lo = _mm256_set1_epi64x(-LO_OCT * BINS_PER_OCTAVE), hi = _mm256_set1_epi64x(HI_OCT * BINS_PER_OCTAVE);
    const __m256i first = _mm256_set1_epi64x(LO_OCT * BINS_PER_OCTAVE + 1);
    for (int i = 0; i < m; i += 4) {
        __m256i b = _mm256_loadu_si256((const __m256i *)(ae + i));  /* ae >= 0: no sign bit */
        __m256i frac = _mm256_and_si256(b, fracmask), t = _mm256_srli_epi64(frac, 44);
        __m256i k = _mm256_add_epi64(_mm256_slli_epi64(_mm256_srli_epi64(b, 52), 4), base);  /* 16 E + 1 */
        k = _mm256_add_epi64(k, _mm256_cmpeq_epi64(frac, zero));  /* - 1 where f = 0 */
        k = _mm256_add_epi64(k, _mm256_i64gather_epi64((const long long *)below64, t, 8));
        k = _mm256_sub_epi64(k, _mm256_cmpgt_epi64(frac, _mm256_i64gather_epi64((const long long *)inside64, t, 8)));
        k = _mm256_blendv_epi8(k, lo, _mm256_cmpgt_epi64(lo, k));
        k = _mm256_blendv_epi8(k, hi, _mm256_cmpgt_epi64(k, hi));
        k = _mm256_andnot_si256(_mm256_cmpeq_epi64(b, zero), _mm256_add_epi64(k, first));
        _mm256_storeu_si256((__m256i *)(out + i), k);
    }
}

/* bins_avx512: the same, eight at a time with AVX-512F, the two table lookups replaced by one
 * lookup in packed32 (two two-register permutes and a blend; gathers are slow) on the top 5 bits
 * of the fraction: #{j : f > N_j} = below + (f > inside) of f's bucket. */
__attribute__((target("avx512f"))) static void bins_avx512(const double *ae, int m, int64_t *out) {
    const __m512i fracmask = _mm512_set1_epi64((long long)FRAC_MASK), zero = _mm512_setzero_si512();
    const __m512i base = _mm512_set1_epi64(1 - (long long)BINS_PER_OCTAVE * 1023);
    const __m512i lo = _mm512_set1_epi64(-LO_OCT * BINS_PER_OCTAVE), hi = _mm512_set1_epi64(HI_OCT * BINS_PER_OCTAVE);
    const __m512i first = _mm512_set1_epi64(LO_OCT * BINS_PER_OCTAVE + 1), one = _mm512_set1_epi64(1);
    const __m512i low56 = _mm512_set1_epi64((1LL << 56) - 1), sixteen = _mm512_set1_epi64(16);
    const __m512i t0 = _mm512_loadu_si512(packed32), t1 = _mm512_loadu_si512(packed32 + 8);
    const __m512i t2 = _mm512_loadu_si512(packed32 + 16), t3 = _mm512_loadu_si512(packed32 + 24);
    for (int i = 0; i < m; i += 8) {
        __m512i b = _mm512_loadu_si512(ae + i);  /* ae >= 0: no sign bit */
        __m512i frac = _mm512_and_si512(b, fracmask), t = _mm512_srli_epi64(frac, 47);
        __m512i e = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(t, sixteen), _mm512_permutex2var_epi64(t0, t, t1),
                                            _mm512_permutex2var_epi64(t2, t, t3));
        __m512i k = _mm512_add_epi64(_mm512_slli_epi64(_mm512_srli_epi64(b, 52), 4), base);  /* 16 E + 1 */
        k = _mm512_mask_sub_epi64(k, _mm512_cmpeq_epi64_mask(frac, zero), k, one);  /* - 1 where f = 0 */
        k = _mm512_add_epi64(k, _mm512_srli_epi64(e, 56));
        k = _mm512_mask_add_epi64(k, _mm512_cmpgt_epi64_mask(frac, _mm512_and_si512(e, low56)), k, one);
        k = _mm512_min_epi64(_mm512_max_epi64(k, lo), hi);
        k = _mm512_maskz_add_epi64(_mm512_cmpneq_epi64_mask(b, zero), k, first);
        _mm512_storeu_si512(out + i, k);
    }
}
#endif

/* The state of one judge call: its inputs, the caller's workspace, and the running totals. */
typedef struct {
    const void *a; int akind;               /* the output as stored: 0 float64, 1 float32, 2 bfloat16 */
    const double *r, *b, *e;                /* b, e: n values, or one (bfull, efull = 0); e may be NULL */
    double uscale, ulo;                     /* ulp(r) = max(2^floor(log2|r|) uscale, ulo), as spacing() */
    int bfull, efull, may_spill;
    double kappa, smallest_normal, overflow;
    uint8_t *seen; uint32_t (*sub)[NBINS];  /* distinct-value bitmap; four interleaved sub-histograms */
    double *abuf, *sbuf, *s2buf, *ablk, *sblk, *s2blk;
    int64_t *skip, *top;
    Py_ssize_t afill, sfill, nablk, nsblk, nskip, ntop, compared, violations, scount;
    double norm_max, max_abs, topv[WORST_K];
    /* the row_bias sums (rows = 1; see the top of the file): segment lengths, the end of the current segment,
     * its running sums, the outputs */
    int rows, rel; double urel; Py_ssize_t rlen, rend, rseg; int64_t rs, rk, rd;
    int64_t *rsums, *rkept, *rdsums;
} judge_state;

/* The loop runs over groups of GROUP elements in two passes.  Pass 1 is elementwise and
 * branch-free, so the compiler vectorizes it: the widened output, norm, |e|, s = sign(r) e, s*s,
 * the bitmap hash and three flags per element (OK: compared, not skipped; SIGNED: enters the
 * signed streams; REDO: e needs the division or the spill below, computed again in pass 2).
 * Pass 2 takes the elements in order.  A group with every element OK and none to REDO (nearly all
 * of them) is taken stream by stream (maxima, worst ten, histogram, block copies into the
 * streams); any other group element by element.  Each total is the same IEEE result in the same
 * order as one element at a time, so the output is unchanged bit for bit. */
#define GROUP 256
#define G_OK 1u
#define G_SIGNED 2u
#define G_REDO 4u
/* The judge is compiled three times where the toolchain supports function multiversioning (x86-64
 * with glibc's ifunc): for x86-64-v4 (AVX-512 F/BW/CD/DQ/VL: GCC 12 or later), for AVX2 and for
 * the baseline, chosen at load.  Pass 1 runs 4 doubles wide with AVX2 (no FMA contraction:
 * -ffp-contract=off): the judge is 1.2-1.3x faster than the baseline build; the x86-64-v4 build,
 * 8 wide, 1.25x faster again (docs/benchmarks.md).  The operations are the same in every build. */
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12  /* (GCC 12 takes arch= levels in clones) */
#define MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define MULTIVERSION __attribute__((target_clones("avx2", "default")))
#endif
#endif
#endif
#ifndef MULTIVERSION
#define MULTIVERSION
#endif
#if defined(_MSC_VER)  /* MSVC's C: no __attribute__, restrict spelled __restrict */
#define NS_RESTRICT __restrict
#define NS_ALIGNED(n) __declspec(align(n))
#else
#define NS_RESTRICT restrict
#define NS_ALIGNED(n) __attribute__((aligned(n)))
#endif
/* helpers of judge_run that must be compiled into each of its clones (a call would run the baseline build) */
#if defined(__GNUC__)
#define NS_ALWAYS_INLINE __attribute__((always_inline))
#else
#define NS_ALWAYS_INLINE
#endif

static inline void push_top(judge_state *NS_RESTRICT S, double norm, Py_ssize_t i) {
    /* the WORST_K largest norms, sorted descending; ties keep the earlier position */
    if (S->ntop < WORST_K || norm > S->topv[S->ntop - 1]) {
        Py_ssize_t j = S->ntop < WORST_K ? S->ntop++ : WORST_K - 1;
        while (j > 0 && norm > S->topv[j - 1]) { S->topv[j] = S->topv[j - 1]; S->top[j] = S->top[j - 1]; j--; }
        S->topv[j] = norm; S->top[j] = i;
    }
}

/* append c values to a stream buffer of BLOCK values, summing each full block by the halving tree */
static inline void put_abs(judge_state *NS_RESTRICT S, const double *x, int c) {
    while (c > 0) {
        int k = BLOCK - (int)S->afill < c ? BLOCK - (int)S->afill : c;
        memcpy(S->abuf + S->afill, x, 8 * (size_t)k);
        S->afill += k; x += k; c -= k;
        if (S->afill == BLOCK) { tree(S->abuf); S->ablk[S->nablk++] = S->abuf[0]; S->afill = 0; }
    }
}

static inline void put_signed(judge_state *NS_RESTRICT S, const double *s, const double *s2, int c) {
    while (c > 0) {
        int k = BLOCK - (int)S->sfill < c ? BLOCK - (int)S->sfill : c;
        memcpy(S->sbuf + S->sfill, s, 8 * (size_t)k);
        memcpy(S->s2buf + S->sfill, s2, 8 * (size_t)k);
        S->sfill += k; s += k; s2 += k; c -= k;
        if (S->sfill == BLOCK) {
            tree(S->sbuf); tree(S->s2buf);
            S->sblk[S->nsblk] = S->sbuf[0]; S->s2blk[S->nsblk++] = S->s2buf[0]; S->sfill = 0;
        }
    }
}

static inline void mark_seen(uint8_t *seen, uint32_t h) { seen[h >> 3] |= (uint8_t)(1u << (h & 7)); }

/* rint(x) for |x| < 2^51 under round-to-nearest-even, as numpy's rint: adding and removing 1.5 * 2^52
 * rounds away the fraction (branch-free, so the loops below vectorize) */
#define RINT_SHIFT 6755399441055744.0
#define ROW_SCALE 1073741824.0  /* 2^30 */

/* sums of m <= GROUP integer-valued doubles |x| <= 2^30 in eight lanes: every partial sum is an
 * integer below 2^53, so exact in any order */
static inline int64_t isum_block(const double *NS_RESTRICT x, int m) {
    NS_ALIGNED(64) double acc[8] = {0.0};
    int i = 0;
    for (; i + 8 <= m; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += x[i + k];
    for (; i < m; i++) acc[0] += x[i];
    int64_t s = 0;
    for (int k = 0; k < 8; k++) s += (int64_t)acc[k];
    return s;
}

/* The row_bias terms of one group of the judge (q, kept and dq: see the top of the file), from pass 1's
 * |a - r| / b (qraw: (a - r) / b is the same magnitude with the sign of a - r), added to the
 * running segment sums; a segment ends every rlen elements (the first one at rend). */
NS_ALWAYS_INLINE static inline void row_group(judge_state *NS_RESTRICT S, const double *NS_RESTRICT av, const double *NS_RESTRICT rp,
                             const double *NS_RESTRICT bp, const double *NS_RESTRICT qraw, Py_ssize_t i0, int m,
                             Py_ssize_t n) {
    NS_ALIGNED(64) double q[GROUP], kf[GROUP], dq[GROUP];
    const double ovf = S->overflow, urel = S->urel;
    for (int i = 0; i < m; i++) {
        double ai = av[i], ri = rp[i], d = ai - ri, ar = fabs(ri);
        int keep = ((bits_of(ai) & EXP_BITS) != EXP_BITS) & (ar < ovf) & (ri != 0.0);
        double t = double_of(bits_of(qraw[i]) ^ ((bits_of(d) ^ bits_of(ri)) & SIGN_BIT));  /* sign(r) (a - r) / b */
        t = t != t ? 0.0 : t;  /* 0/0: no error */
        t = keep ? t : 0.0;
        t = t < -1.0 ? -1.0 : (t > 1.0 ? 1.0 : t);
        q[i] = (t * ROW_SCALE + RINT_SHIFT) - RINT_SHIFT;
        kf[i] = keep ? 1.0 : 0.0;
    }
    if (S->rel)
        for (int i = 0; i < m; i++) {
            double x = fabs(rp[i]) * urel / bp[i];
            x = (kf[i] != 0.0) & (x == x) ? x : 0.0;  /* (NaN: 0) */
            x = x > 1.0 ? 1.0 : x;
            x = x > 0.0 ? x : 0.0;
            dq[i] = (x * ROW_SCALE + RINT_SHIFT) - RINT_SHIFT;
        }
    if (S->rlen == 1) {  /* every element its own segment */
        int64_t *NS_RESTRICT s = S->rsums + i0, *NS_RESTRICT k = S->rkept + i0, *NS_RESTRICT ds = S->rdsums + i0;
        for (int i = 0; i < m; i++) { s[i] = (int64_t)q[i]; k[i] = (int64_t)kf[i]; }
        if (S->rel) for (int i = 0; i < m; i++) ds[i] = (int64_t)dq[i];
        else for (int i = 0; i < m; i++) ds[i] = 0;
        return;
    }
    int j = 0;
    while (j < m) {
        int take = S->rend - (i0 + j) < m - j ? (int)(S->rend - (i0 + j)) : m - j;
        S->rs += isum_block(q + j, take); S->rk += isum_block(kf + j, take);
        if (S->rel) S->rd += isum_block(dq + j, take);
        j += take;
        if (i0 + j == S->rend) {
            S->rsums[S->rseg] = S->rs; S->rkept[S->rseg] = S->rk; S->rdsums[S->rseg] = S->rd;
            S->rseg++; S->rs = S->rk = S->rd = 0;
            S->rend = S->rend + S->rlen < n ? S->rend + S->rlen : n;
        }
    }
}

MULTIVERSION static void judge_run(judge_state *out, Py_ssize_t n) {
    judge_state state = *out, *NS_RESTRICT S = &state;  /* a local copy: the stores into the buffers cannot alias it */
    NS_ALIGNED(64) double av[GROUP], bone[GROUP], eone[GROUP], up[GROUP];
    NS_ALIGNED(64) double nrm[GROUP], aes[GROUP], sv[GROUP], sv2[GROUP], qraw[GROUP];
    NS_ALIGNED(64) uint32_t hs[GROUP];
    NS_ALIGNED(64) uint8_t fl[GROUP];
    NS_ALIGNED(64) int64_t bn[GROUP];
#ifdef HAVE_BINS_AVX2
    const int avx2 = __builtin_cpu_supports("avx2"), avx512 = packed32_ok && __builtin_cpu_supports("avx512f");
#endif
    const double kappa = S->kappa, sn = S->smallest_normal, ovf = S->overflow;
    const int have_e = S->e != NULL;
    const unsigned spill = S->may_spill ? 1u : 0u;
    for (int i = 0; i < GROUP; i++) {  /* single bound / ulp / E values, broadcast */
        bone[i] = S->b[0];
        eone[i] = have_e ? S->e[0] : 0.0;
    }
    for (Py_ssize_t i0 = 0; i0 < n; i0 += GROUP) {
        const int m = n - i0 < GROUP ? (int)(n - i0) : GROUP;
        if (S->akind == 0) { const double *p = (const double *)S->a + i0; for (int i = 0; i < m; i++) av[i] = p[i]; }
        else if (S->akind == 1) { const float *p = (const float *)S->a + i0; for (int i = 0; i < m; i++) av[i] = (double)p[i]; }
        else { const uint16_t *p = (const uint16_t *)S->a + i0; for (int i = 0; i < m; i++) av[i] = (double)float_of((uint32_t)p[i] << 16); }
        const double *rp = S->r + i0, *bp = S->bfull ? S->b + i0 : bone;
        for (int i = 0; i < m; i++) up[i] = spacing_of(rp[i], S->uscale, S->ulo);  /* (non-finite r: skipped) */
        const double *ep = S->efull ? S->e + i0 : eone;
        unsigned all = G_OK | G_SIGNED, any = 0;
        /* the group's violations and maxima of norm and |e|, for the stream-by-stream pass, as
         * integer maxima of the bit patterns (which vectorize): the norms and |e| of a group taken
         * that way are never NaN, and non-negative ones order as their bits; a negative norm (a
         * negative bound, which no model gives) counts as 0 here, which changes nothing: the
         * caller's maximum starts at 0, and the worst ten compare the values themselves */
        int64_t nmax = 0, amax = 0, viol = 0;
        for (int i = 0; i < m; i++) {  /* pass 1 */
            double ai = av[i], ri = rp[i], ui = up[i], ar = fabs(ri);
            uint64_t ab = bits_of(ai), ue = bits_of(ui) >> 52;  /* ui = 2^k > 0: its biased exponent */
            unsigned ok = ((ab & EXP_BITS) != EXP_BITS) & (ar < ovf);
            double d = ai - ri, err = fabs(d), q = err / bp[i];
            nrm[i] = q != q ? (err == 0.0 ? 0.0 : INFINITY) : q;  /* 0/0 -> 0, x/NaN -> inf */
            qraw[i] = q;
            /* e = d / 2^k as d * 2^-k (the same correctly rounded scaling) where 2^k and 2^-k are
             * both normal; elsewhere (ue - 1 >= 2045) pass 2 divides */
            double x = d * double_of(((2046ULL - ue) & 0x7FF) << 52);
            unsigned redo = (ue - 1 >= 2045) | (spill & ((bits_of(x) & EXP_BITS) == EXP_BITS));
            unsigned sg = (ar >= sn) & ((unsigned)!have_e | (ep[i] <= kappa * ui));
            double s = double_of((bits_of(ri) & SIGN_BIT) ^ bits_of(x));
            aes[i] = fabs(x); sv[i] = s; sv2[i] = s * s;
            hs[i] = (uint32_t)((ab * 0x9E3779B97F4A7C15ULL) >> (64 - DISTINCT_BITS));
            unsigned f = ok | (ok & sg) << 1 | (ok & redo) << 2;
            fl[i] = (uint8_t)f; all &= f; any |= f;
        }
        if (S->rows) row_group(S, av, rp, bp, qraw, i0, m, n);
        {
            const int64_t *nbits = (const int64_t *)nrm, *abits = (const int64_t *)aes;
            for (int i = 0; i < m; i++) {
                int64_t nb = nbits[i], xb = abits[i];
                nmax = nb > nmax ? nb : nmax; amax = xb > amax ? xb : amax;
                viol += nb > (int64_t)0x3FF0000000000000LL;  /* norm > 1.0 (false for negative norms) */
            }
        }
        if ((all & G_OK) && !(any & G_REDO)) {  /* pass 2, stream by stream */
            double n0 = double_of((uint64_t)nmax), a0 = double_of((uint64_t)amax);
            Py_ssize_t v = viol;
            int i;
            S->violations += v;
            if (S->compared == 0 || n0 > S->norm_max) S->norm_max = n0;
            if (a0 > S->max_abs) S->max_abs = a0;
            S->compared += m;
            if (S->ntop < WORST_K || n0 > S->topv[S->ntop - 1])
                for (i = 0; i < m; i++) push_top(S, nrm[i], i0 + i);
            uint32_t (*sub)[NBINS] = S->sub;
#ifdef HAVE_BINS_AVX2
            if (avx512 && m == GROUP) bins_avx512(aes, m, bn);
            else if (avx2 && m == GROUP) bins_avx2(aes, m, bn);
            else
#endif
                for (i = 0; i < m; i++) bn[i] = bin_of(aes[i]);
            put_abs(S, aes, m);
            if (all & G_SIGNED) {  /* (the histogram's and the bitmap's scattered stores in one loop) */
                put_signed(S, sv, sv2, m);
                S->scount += m;
                for (i = 0; i < m; i++) { sub[i & 3][bn[i]]++; mark_seen(S->seen, hs[i]); }
            } else {
                for (i = 0; i < m; i++) sub[i & 3][bn[i]]++;
                for (i = 0; i < m; i++)
                    if (fl[i] & G_SIGNED) {
                        put_signed(S, sv + i, sv2 + i, 1);
                        S->scount++;
                        mark_seen(S->seen, hs[i]);
                    }
            }
            continue;
        }
        for (int i = 0; i < m; i++) {  /* pass 2, element by element */
            unsigned f = fl[i];
            if (!(f & G_OK)) { S->skip[S->nskip++] = i0 + i; continue; }
            double ae = aes[i];
            if (f & G_REDO) {
                double ai = av[i], ri = rp[i], ui = up[i], d = ai - ri;
                uint64_t ue = bits_of(ui) >> 52;
                double x = ue - 1 < 2045 ? d * double_of((2046ULL - ue) << 52) : d / ui;
                if (spill && !isfinite(x)) x = ai / ui - ri / ui;
                double s = double_of((bits_of(ri) & SIGN_BIT) ^ bits_of(x));
                ae = fabs(x); sv[i] = s; sv2[i] = s * s;
            }
            double norm = nrm[i];
            S->violations += norm > 1.0;
            if (S->compared == 0 || norm > S->norm_max) S->norm_max = norm;
            S->compared++;
            push_top(S, norm, i0 + i);
            if (ae > S->max_abs) S->max_abs = ae;
            S->sub[i & 3][bin_of(ae)]++;
            put_abs(S, &ae, 1);
            if (f & G_SIGNED) {
                put_signed(S, sv + i, sv2 + i, 1);
                S->scount++;
                mark_seen(S->seen, hs[i]);
            }
        }
    }
    *out = state;
}

static PyObject *judge(PyObject *self, PyObject *args) {
    PyObject *oa, *or_, *ob, *oe, *oseen, *ohist, *oabuf, *osbuf, *oablk, *osblk, *oskip, *otop;
    double kappa, smallest_normal, overflow;
    int may_spill;
    Py_ssize_t afill, sfill;
    int akind;  /* the output's storage: 0 float64, 1 float32, 2 bfloat16 (read as uint16) */
    double uscale, ulo;  /* ulp(r) = max(2^floor(log2|r|) uscale, ulo): numstd.ulp._spacing_params */
    /* rows: None, or (length, first, urel, sums, kept, dsums): also the row_bias sums (top of the file) */
    PyObject *orows = Py_None, *orsums = NULL, *orkept = NULL, *ordsums = NULL;
    Py_ssize_t rlen = 1, rfirst = 0;
    double urel = -1.0;
    if (!PyArg_ParseTuple(args, "OiOOOdddpOOOnOnOOOOdd|O", &oa, &akind, &or_, &ob, &oe, &kappa, &smallest_normal,
                          &overflow, &may_spill, &oseen, &ohist, &oabuf, &afill, &osbuf, &sfill, &oablk, &osblk,
                          &oskip, &otop, &uscale, &ulo, &orows))
        return NULL;
    int have_rows = orows != Py_None;
    if (have_rows && !PyArg_ParseTuple(orows, "nndOOO", &rlen, &rfirst, &urel, &orsums, &orkept, &ordsums)) return NULL;
    if (have_rows && (rlen < 1 || rfirst < 0 || rfirst >= rlen)) {
        PyErr_SetString(PyExc_ValueError, "numstd._native.judge: bad row length or first");
        return NULL;
    }
    if (!thresholds_set) {
        PyErr_SetString(PyExc_RuntimeError, "numstd._native: set_thresholds was not called");
        return NULL;
    }
    Py_buffer va = {0}, vr = {0}, vb = {0}, ve = {0}, vseen = {0}, vhist = {0}, vabuf = {0}, vsbuf = {0},
              vablk = {0}, vsblk = {0}, vskip = {0}, vtop = {0}, vrs = {0}, vrk = {0}, vrd = {0};
    PyObject *result = NULL;
    int have_e = oe != Py_None;
    if (akind < 0 || akind > 2) {
        PyErr_SetString(PyExc_ValueError, "numstd._native.judge: akind must be 0 (float64), 1 (float32) or 2 (bfloat16)");
        return NULL;
    }
    if (PyObject_GetBuffer(oa, &va, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    Py_ssize_t n = va.len / (akind == 0 ? 8 : akind == 1 ? 4 : 2);
    if (get_f64(or_, &vr, n, "r", 0) < 0) goto done;
    if (get_f64(ob, &vb, n, "bound", 1) < 0) goto done;
    if (!(uscale > 0.0 && ulo > 0.0)) {
        PyErr_SetString(PyExc_ValueError, "numstd._native.judge: uscale and ulo must be positive");
        goto done;
    }
    if (have_e && get_f64(oe, &ve, n, "epre", 1) < 0) goto done;
    if (PyObject_GetBuffer(oseen, &vseen, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (PyObject_GetBuffer(ohist, &vhist, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (PyObject_GetBuffer(oabuf, &vabuf, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (PyObject_GetBuffer(osbuf, &vsbuf, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (PyObject_GetBuffer(oablk, &vablk, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (PyObject_GetBuffer(osblk, &vsblk, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (PyObject_GetBuffer(oskip, &vskip, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (PyObject_GetBuffer(otop, &vtop, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (have_rows) {
        Py_ssize_t nseg = (rfirst > 0) + (n > rfirst ? (n - rfirst + rlen - 1) / rlen : 0);
        if (PyObject_GetBuffer(orsums, &vrs, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
        if (PyObject_GetBuffer(orkept, &vrk, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
        if (PyObject_GetBuffer(ordsums, &vrd, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
        if (vrs.len < 8 * nseg || vrk.len < 8 * nseg || vrd.len < 8 * nseg) {
            PyErr_SetString(PyExc_ValueError, "numstd._native.judge: row sums arrays too small");
            goto done;
        }
    }
    Py_ssize_t need = n / BLOCK + 1, cap = vsblk.len / 16;  /* s sums at [0, cap), s*s sums at [cap, 2 cap) */
    if ((uint64_t)n >= (1ULL << 32)) {  /* the sub-histograms count in 32 bits */
        PyErr_SetString(PyExc_ValueError, "numstd._native.judge: judge at most 2^32 - 1 elements per call");
        goto done;
    }
    if (vseen.len != (1 << DISTINCT_BITS) / 8 || vhist.len != 8 * NBINS || vabuf.len != 8 * BLOCK ||
        vsbuf.len != 16 * BLOCK || vablk.len < 8 * need || cap < need || vskip.len < 8 * n ||
        vtop.len != 8 * WORST_K || afill < 0 || afill >= BLOCK || sfill < 0 || sfill >= BLOCK) {
        PyErr_SetString(PyExc_ValueError, "numstd._native.judge: workspace of the wrong size");
        goto done;
    }
    {
        judge_state S = {0};
        S.a = va.buf; S.akind = akind; S.r = vr.buf; S.b = vb.buf; S.e = have_e ? ve.buf : NULL;
        S.uscale = uscale; S.ulo = ulo;
        S.bfull = vb.len == 8 * n; S.efull = have_e && ve.len == 8 * n;
        S.kappa = kappa; S.smallest_normal = smallest_normal; S.overflow = overflow; S.may_spill = may_spill;
        S.seen = vseen.buf; S.skip = vskip.buf; S.top = vtop.buf;
        S.abuf = vabuf.buf; S.sbuf = vsbuf.buf; S.s2buf = (double *)vsbuf.buf + BLOCK; S.afill = afill; S.sfill = sfill;
        S.ablk = vablk.buf; S.sblk = vsblk.buf; S.s2blk = (double *)vsblk.buf + cap;
        if (have_rows) {
            S.rows = 1; S.rel = urel >= 0.0; S.urel = urel; S.rlen = rlen;
            S.rend = rfirst > 0 ? (rfirst < n ? rfirst : n) : (rlen < n ? rlen : n);
            S.rsums = vrs.buf; S.rkept = vrk.buf; S.rdsums = vrd.buf;
        }
        int64_t *hist = vhist.buf;
        /* four interleaved sub-histograms: consecutive errors often share a bin, and one counter
         * would make every increment wait for the previous store */
        S.sub = calloc(4, sizeof *S.sub);
        if (!S.sub) { PyErr_NoMemory(); goto done; }
        Py_BEGIN_ALLOW_THREADS
        judge_run(&S, n);
        for (int k = 0; k < NBINS; k++) hist[k] += (int64_t)S.sub[0][k] + S.sub[1][k] + S.sub[2][k] + S.sub[3][k];
        Py_END_ALLOW_THREADS
        free(S.sub);
        result = Py_BuildValue("nnddnnnnnnn", S.compared, S.violations, S.norm_max, S.max_abs, S.scount, S.afill,
                               S.nablk, S.sfill, S.nsblk, S.nskip, S.ntop);
    }
done:
    PyBuffer_Release(&va); PyBuffer_Release(&vr); PyBuffer_Release(&vb);
    if (have_e) PyBuffer_Release(&ve);
    PyBuffer_Release(&vseen); PyBuffer_Release(&vhist); PyBuffer_Release(&vabuf); PyBuffer_Release(&vsbuf);
    PyBuffer_Release(&vablk); PyBuffer_Release(&vsblk); PyBuffer_Release(&vskip); PyBuffer_Release(&vtop);
    if (vrs.obj) PyBuffer_Release(&vrs);
    if (vrk.obj) PyBuffer_Release(&vrk);
    if (vrd.obj) PyBuffer_Release(&vrd);
    return result;
}

/* spacing(r, out, scale, floor): out = max((|r| with the fraction bits cleared) * scale, floor), NaN
 * where r is not finite; scale = 2^(1-p), floor = 2^(emin-p+1) (see numstd.ulp._spacing: the same
 * three exact operations, so the same bits). */
static PyObject *spacing(PyObject *self, PyObject *args) {
    PyObject *orr, *oout;
    double scale, lo;
    if (!PyArg_ParseTuple(args, "OOdd", &orr, &oout, &scale, &lo)) return NULL;
    Py_buffer vr = {0}, vo = {0};
    if (PyObject_GetBuffer(orr, &vr, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(oout, &vo, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) { PyBuffer_Release(&vr); return NULL; }
    if (vr.len != vo.len || vr.len % 8) {
        PyErr_SetString(PyExc_ValueError, "numstd._native.spacing: r and out must be float64 arrays of one size");
        PyBuffer_Release(&vr); PyBuffer_Release(&vo);
        return NULL;
    }
    const double *r = vr.buf;
    double *out = vo.buf;
    Py_ssize_t n = vr.len / 8;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) out[i] = spacing_of(r[i], scale, lo);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&vr); PyBuffer_Release(&vo);
    Py_RETURN_NONE;
}

#ifdef NUMSTD_NUMPY_POOL
/* A numpy data-memory handler (NEP 49) that keeps freed blocks of 64 KiB or more (up to a byte budget
 * set by pool_enter) while at least one
 * pool user is active (pool_enter ... pool_exit) and hands them out again for requests of the same
 * size.  check's chunks allocate the same temporaries chunk after chunk; without the pool glibc
 * returns them to the kernel (munmap, or trimming the heap) and every chunk pays page faults for
 * fresh memory, which doubled check's time in some process states.  Every block records its size,
 * so a block is reused only for a request of exactly that size, whatever size numpy reports when
 * freeing.  The handler is installed per context (numpy keeps it in a ContextVar), so
 * only arrays created inside numstd.native.pool() use it; they may outlive it (freed directly then).
 * When the last user exits, the kept blocks are freed. */
#define POOL_ALIGN 64  /* cache-line aligned data: SIMD loops and BLAS run measurably faster */
#define POOL_MIN ((size_t)64 << 10)
#define POOL_SLOTS 64

static struct {
    void *data[POOL_SLOTS];
    size_t size[POOL_SLOTS];
    int n;
    size_t bytes, peak;       /* kept for reuse now, and the most since the last reset */
    size_t held, held_peak;   /* allocated through the handler and not given back: live + kept */
    size_t max_bytes;         /* keep at most this much (pool_enter) */
    long users;
} pool;
static PyThread_type_lock pool_lock = NULL;

/* A block: malloc'd raw memory, data aligned to POOL_ALIGN, and just below the data the raw pointer
 * and the size asked for. */
static void *block_new(size_t size, int zero) {
    if (size > (size_t)-1 - 2 * POOL_ALIGN) return NULL;
    char *raw = zero ? calloc(1, size + 2 * POOL_ALIGN) : malloc(size + 2 * POOL_ALIGN);
    if (!raw) return NULL;
    char *data = (char *)(((uintptr_t)raw + 2 * sizeof(size_t) + POOL_ALIGN - 1) & ~(uintptr_t)(POOL_ALIGN - 1));
    ((void **)data)[-2] = raw;
    ((size_t *)data)[-1] = size;
    PyThread_acquire_lock(pool_lock, WAIT_LOCK);
    pool.held += size;
    if (pool.held > pool.held_peak) pool.held_peak = pool.held;
    PyThread_release_lock(pool_lock);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (size >= ((size_t)1 << 22)) {  /* as numpy's own allocator does: huge pages for BLAS-sized arrays */
        uintptr_t start = ((uintptr_t)data + 4095) & ~(uintptr_t)4095;
        if (start < (uintptr_t)data + size) madvise((void *)start, (uintptr_t)data + size - start, MADV_HUGEPAGE);
    }
#endif
    return data;
}

static inline size_t block_size(void *data) { return ((size_t *)data)[-1]; }
static inline void block_free(void *data) {
    PyThread_acquire_lock(pool_lock, WAIT_LOCK);
    pool.held -= block_size(data);
    PyThread_release_lock(pool_lock);
    free(((void **)data)[-2]);
}

static void *pool_malloc(void *ctx, size_t size) {
    if (size >= POOL_MIN) {
        PyThread_acquire_lock(pool_lock, WAIT_LOCK);
        for (int k = pool.n - 1; k >= 0; k--) {
            if (pool.size[k] == size) {
                void *data = pool.data[k];
                pool.n--;
                pool.data[k] = pool.data[pool.n];
                pool.size[k] = pool.size[pool.n];
                pool.bytes -= size;
                PyThread_release_lock(pool_lock);
                return data;
            }
        }
        PyThread_release_lock(pool_lock);
    }
    return block_new(size, 0);
}

static void *pool_calloc(void *ctx, size_t nelem, size_t elsize) {
    if (elsize && nelem > ((size_t)-1 - 2 * POOL_ALIGN) / elsize) return NULL;
    return block_new(nelem * elsize, 1);
}

static void *pool_realloc(void *ctx, void *ptr, size_t size) {
    if (!ptr) return pool_malloc(ctx, size);
    size_t old = block_size(ptr);
    void *data = block_new(size, 0);
    if (!data) return NULL;
    memcpy(data, ptr, old < size ? old : size);
    block_free(ptr);
    return data;
}

static void pool_free(void *ctx, void *ptr, size_t reported) {
    if (!ptr) return;
    size_t size = block_size(ptr);  /* the real size, not numpy's report */
    if (size >= POOL_MIN) {
        PyThread_acquire_lock(pool_lock, WAIT_LOCK);
        if (pool.users > 0 && pool.n < POOL_SLOTS && pool.bytes + size <= pool.max_bytes) {
            pool.data[pool.n] = ptr;
            pool.size[pool.n++] = size;
            pool.bytes += size;
            if (pool.bytes > pool.peak) pool.peak = pool.bytes;
            PyThread_release_lock(pool_lock);
            return;
        }
        PyThread_release_lock(pool_lock);
    }
    block_free(ptr);
}

static PyDataMem_Handler pool_handler = {
    "numstd_pool", 1, {NULL, pool_malloc, pool_calloc, pool_realloc, pool_free}};
static PyObject *pool_capsule = NULL;

/* pool_enter(max_bytes) -> the handler that was current (give it to pool_exit); the pool keeps at
 * most max_bytes (the largest any current user asked for) */
static PyObject *pool_enter(PyObject *self, PyObject *args) {
    Py_ssize_t max_bytes;
    if (!PyArg_ParseTuple(args, "n", &max_bytes)) return NULL;
    PyThread_acquire_lock(pool_lock, WAIT_LOCK);
    if (pool.users++ == 0 || (size_t)max_bytes > pool.max_bytes) pool.max_bytes = max_bytes > 0 ? (size_t)max_bytes : 0;
    PyThread_release_lock(pool_lock);
    return PyDataMem_SetHandler(pool_capsule);
}

/* pool_exit(previous): restore the handler; the last user frees the kept blocks */
static PyObject *pool_exit(PyObject *self, PyObject *args) {
    PyObject *prev;
    if (!PyArg_ParseTuple(args, "O", &prev)) return NULL;
    PyObject *cur = PyDataMem_SetHandler(prev);
    Py_XDECREF(cur);
    void *drop[POOL_SLOTS];
    int ndrop = 0;
    PyThread_acquire_lock(pool_lock, WAIT_LOCK);
    if (--pool.users == 0) {
        for (int k = 0; k < pool.n; k++) drop[ndrop++] = pool.data[k];
        pool.n = 0;
        pool.bytes = 0;
    }
    PyThread_release_lock(pool_lock);
    for (int k = 0; k < ndrop; k++) block_free(drop[k]);
    Py_RETURN_NONE;
}

/* pool_stats(reset=0) -> (blocks kept now, bytes kept now, most bytes kept at once, bytes held now,
 * most bytes held at once); "held": allocated through the handler and not given back to the system
 * (live arrays + kept blocks); peaks since the last reset=1, which restarts them from now */
static PyObject *pool_stats(PyObject *self, PyObject *args) {
    int reset = 0;
    if (!PyArg_ParseTuple(args, "|p", &reset)) return NULL;
    PyThread_acquire_lock(pool_lock, WAIT_LOCK);
    PyObject *r = Py_BuildValue("innnn", pool.n, (Py_ssize_t)pool.bytes, (Py_ssize_t)pool.peak,
                                (Py_ssize_t)pool.held, (Py_ssize_t)pool.held_peak);
    if (reset) { pool.peak = pool.bytes; pool.held_peak = pool.held; }
    PyThread_release_lock(pool_lock);
    return r;
}
#endif

/* model_bound(e, absref, ref_error, out, rho, add_normal, smallest_normal, scale, floor):
 * out = ((e + rho * ulp(absref + e)) [+ smallest_normal]) + ref_error, the bound B_i of
 * numstd.models.ErrorModel.bound, with ulp as in spacing(); e and ref_error are n values or one. */
static PyObject *model_bound(PyObject *self, PyObject *args) {
    PyObject *oe, *oa, *orf, *oout;
    double rho, sn, scale, lo;
    int add_normal;
    if (!PyArg_ParseTuple(args, "OOOOdpddd", &oe, &oa, &orf, &oout, &rho, &add_normal, &sn, &scale, &lo)) return NULL;
    Py_buffer ve = {0}, va = {0}, vr = {0}, vo = {0};
    PyObject *result = NULL;
    if (PyObject_GetBuffer(oout, &vo, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    Py_ssize_t n = vo.len / 8;
    if (get_f64(oa, &va, n, "absref", 0) < 0) goto done;
    if (get_f64(oe, &ve, n, "e", 1) < 0) goto done;
    if (get_f64(orf, &vr, n, "ref_error", 1) < 0) goto done;
    {
        const double *e = ve.buf, *a = va.buf, *rf = vr.buf;
        double *out = vo.buf;
        int es = ve.len == 8 * n, rs = vr.len == 8 * n;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) out[i] = bound_of(e[i * es], a[i], rf[i * rs], rho, add_normal, sn, scale, lo);
        Py_END_ALLOW_THREADS
        Py_INCREF(Py_None);
        result = Py_None;
    }
done:
    PyBuffer_Release(&ve); PyBuffer_Release(&va); PyBuffer_Release(&vr); PyBuffer_Release(&vo);
    return result;
}

/* model_eval(code, consts, arrays, rowlen, values, ref_error, e_out, b_out, rho, add_normal, sn, scale, lo):
 * a standard's error formula E_i (numstd.models.formula.Program: the formula compiled to
 * three-address instructions over registers of VM_W values) and the bound B_i of model_bound, in one
 * pass over blocks of VM_W elements instead of one numpy pass per operation.  With b_out None only
 * E is computed (any formula: numstd.models.formula.Formula.compute); values may then be None
 * where the program does not read absref.  Each instruction is
 * the IEEE operation numpy performs for that node of the formula, in the same order, so E and B are
 * the same bits.  code: VM_FIELDS int32 per instruction (op, dst, kind a, index a, kind b, index b);
 * operand kinds: a register, arrays[i] (n values), arrays[i] per row (n / rowlen values, one per
 * row of rowlen elements), consts[i], |values| (absref), or arrays[i] per column (rowlen values,
 * the same for every row). */
#define VM_W 256
#define VM_REGS 8
#define VM_ARRAYS 8
#define VM_FIELDS 6
enum { VM_ADD, VM_SUB, VM_MUL, VM_DIV, VM_NEG, VM_SQRT, VM_ABS, VM_COPY };
enum { VM_REG, VM_ARR, VM_ROW, VM_CONST, VM_ABSREF, VM_COL };

typedef struct {
    const int32_t *code; Py_ssize_t ncode;
    const double *consts; Py_ssize_t nconst;
    const double *arr[VM_ARRAYS]; Py_ssize_t narr;
    Py_ssize_t n, rowlen;
    const double *values, *rf; int rfull, need_abs;  /* values: for absref and the bound only */
    double *e_out, *b_out;                             /* b_out NULL: E only */
    double rho, sn, scale, lo; int add_normal;
} vm_state;

/* operand (kind, index) of the block at i0 of w values: a pointer, or (NULL and) a single value */
static inline const double *vm_operand(const vm_state *V, int kind, int idx, Py_ssize_t i0, int w,
                                       double (*reg)[VM_W], const double *absref, double *scratch, double *one) {
    switch (kind) {
    case VM_REG: return reg[idx];
    case VM_ARR: return V->arr[idx] + i0;
    case VM_ABSREF: return absref;
    case VM_CONST: *one = V->consts[idx]; return NULL;
    case VM_COL: {  /* the column's value for each element of the block (a row of rowlen values) */
        const double *cols = V->arr[idx];
        Py_ssize_t j = i0 % V->rowlen;
        for (int i = 0; i < w;) {
            int k = V->rowlen - j < w - i ? (int)(V->rowlen - j) : w - i;
            memcpy(scratch + i, cols + j, 8 * (size_t)k);
            i += k;
            j = 0;
        }
        return scratch;
    }
    default: {  /* VM_ROW: the row's value for each element of the block */
        const double *rows = V->arr[idx];
        Py_ssize_t row = i0 / V->rowlen, left = V->rowlen - i0 % V->rowlen;  /* elements left in the row */
        for (int i = 0; i < w;) {
            double x = rows[row++];
            int stop = left < w - i ? i + (int)left : w;
            for (; i < stop; i++) scratch[i] = x;
            left = V->rowlen;
        }
        return scratch;
    }
    }
}

#define VM_BINARY(OP)                                                                  \
    if (pa && pb) for (int i = 0; i < w; i++) d[i] = pa[i] OP pb[i];                  \
    else if (pa) for (int i = 0; i < w; i++) d[i] = pa[i] OP cb;                     \
    else if (pb) for (int i = 0; i < w; i++) d[i] = ca OP pb[i];                     \
    else for (int i = 0; i < w; i++) d[i] = ca OP cb;

MULTIVERSION static void vm_run(const vm_state *V) {
    NS_ALIGNED(64) double reg[VM_REGS][VM_W], absref[VM_W], sa[VM_W], sb[VM_W];
    for (Py_ssize_t i0 = 0; i0 < V->n; i0 += VM_W) {
        const int w = V->n - i0 < VM_W ? (int)(V->n - i0) : VM_W;
        if (V->need_abs) { const double *v = V->values + i0; for (int i = 0; i < w; i++) absref[i] = fabs(v[i]); }
        double *eo = V->e_out + i0;
        for (Py_ssize_t k = 0; k < V->ncode; k++) {  /* (the last instruction writes E in place) */
            const int32_t *c = V->code + k * VM_FIELDS;
            double ca = 0.0, cb = 0.0, *d = k == V->ncode - 1 ? eo : reg[c[1]];
            const double *pa = vm_operand(V, c[2], c[3], i0, w, reg, absref, sa, &ca);
            const double *pb = c[0] <= VM_DIV ? vm_operand(V, c[4], c[5], i0, w, reg, absref, sb, &cb) : NULL;
            switch (c[0]) {
            case VM_ADD: VM_BINARY(+) break;
            case VM_SUB: VM_BINARY(-) break;
            case VM_MUL: VM_BINARY(*) break;
            case VM_DIV: VM_BINARY(/) break;
            case VM_NEG: if (pa) for (int i = 0; i < w; i++) d[i] = -pa[i]; else for (int i = 0; i < w; i++) d[i] = -ca; break;
            case VM_SQRT: if (pa) for (int i = 0; i < w; i++) d[i] = sqrt(pa[i]); else for (int i = 0; i < w; i++) d[i] = sqrt(ca); break;
            case VM_ABS: if (pa) for (int i = 0; i < w; i++) d[i] = fabs(pa[i]); else for (int i = 0; i < w; i++) d[i] = fabs(ca); break;
            default: if (pa) memcpy(d, pa, 8 * (size_t)w); else for (int i = 0; i < w; i++) d[i] = ca; break;  /* VM_COPY */
            }
        }
        if (!V->b_out) continue;
        const double *rf = V->rfull ? V->rf + i0 : V->rf;
        double *bo = V->b_out + i0;
        const double rho = V->rho, sn = V->sn, scale = V->scale, lo = V->lo;
        const int add_normal = V->add_normal;
        if (V->rfull)
            for (int i = 0; i < w; i++) bo[i] = bound_of(eo[i], absref[i], rf[i], rho, add_normal, sn, scale, lo);
        else
            for (int i = 0; i < w; i++) bo[i] = bound_of(eo[i], absref[i], rf[0], rho, add_normal, sn, scale, lo);
    }
}

static PyObject *model_eval(PyObject *self, PyObject *args) {
    PyObject *ocode, *oconsts, *oarrays, *ovalues, *orf, *oe, *ob;
    Py_ssize_t rowlen;
    double rho, sn, scale, lo;
    int add_normal;
    if (!PyArg_ParseTuple(args, "OOO!nOOOOdpddd", &ocode, &oconsts, &PyTuple_Type, &oarrays, &rowlen, &ovalues, &orf,
                          &oe, &ob, &rho, &add_normal, &sn, &scale, &lo))
        return NULL;
    Py_buffer vcode = {0}, vconst = {0}, vval = {0}, vrf = {0}, ve = {0}, vb = {0}, varr[VM_ARRAYS];
    Py_ssize_t narr = PyTuple_GET_SIZE(oarrays), got = 0;
    PyObject *result = NULL;
    vm_state V = {0};
    memset(varr, 0, sizeof varr);
    if (narr > VM_ARRAYS) { PyErr_SetString(PyExc_ValueError, "numstd._native.model_eval: at most VM_ARRAYS arrays"); return NULL; }
    int bound = ob != Py_None, have_values = ovalues != Py_None;
    if (PyObject_GetBuffer(oe, &ve, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    Py_ssize_t n = ve.len / 8;
    if (have_values && get_f64(ovalues, &vval, n, "values", 0) < 0) goto done;
    if (bound && get_f64(orf, &vrf, n, "ref_error", 1) < 0) goto done;
    if (bound && PyObject_GetBuffer(ob, &vb, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (PyObject_GetBuffer(ocode, &vcode, PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (PyObject_GetBuffer(oconsts, &vconst, PyBUF_C_CONTIGUOUS) < 0) goto done;
    V.code = vcode.buf; V.ncode = vcode.len / (4 * VM_FIELDS); V.consts = vconst.buf; V.nconst = vconst.len / 8;
    V.need_abs = bound;
    for (Py_ssize_t k = 0; k < V.ncode && vcode.len % (4 * VM_FIELDS) == 0; k++) {
        const int32_t *c = V.code + k * VM_FIELDS;
        V.need_abs |= c[2] == VM_ABSREF || (c[0] <= VM_DIV && c[4] == VM_ABSREF);
    }
    if (vcode.len % (4 * VM_FIELDS) || V.ncode < 1 || vconst.len % 8 || ve.len % 8 || (bound && vb.len != 8 * n) ||
        (V.need_abs && !have_values) || rowlen < 1 || n % rowlen) {
        PyErr_SetString(PyExc_ValueError, "numstd._native.model_eval: malformed program or outputs");
        goto done;
    }
    for (; got < narr; got++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(oarrays, got), &varr[got], PyBUF_C_CONTIGUOUS) < 0) goto done;
        V.arr[got] = varr[got].buf;
    }
    V.narr = narr;
    for (Py_ssize_t k = 0; k < V.ncode; k++) {  /* every index in range: the loop trusts them */
        const int32_t *c = V.code + k * VM_FIELDS;
        int unary = c[0] > VM_DIV;
        if (c[0] < VM_ADD || c[0] > VM_COPY || c[1] < 0 || c[1] >= VM_REGS) goto malformed;
        for (int t = 0; t < (unary ? 1 : 2); t++) {
            int kind = c[2 + 2 * t], idx = c[3 + 2 * t];
            Py_ssize_t need = kind == VM_ARR ? n : kind == VM_ROW ? n / rowlen : rowlen;
            int array = kind == VM_ARR || kind == VM_ROW || kind == VM_COL;
            if (kind < VM_REG || kind > VM_COL || (kind == VM_REG && (idx < 0 || idx >= VM_REGS)) ||
                (kind == VM_CONST && (idx < 0 || idx >= V.nconst)) ||
                (array && (idx < 0 || idx >= narr || varr[idx].len != 8 * need)))
                goto malformed;
        }
    }
    V.n = n; V.rowlen = rowlen; V.values = vval.buf; V.rf = vrf.buf; V.rfull = vrf.len == 8 * n;
    V.e_out = ve.buf; V.b_out = bound ? vb.buf : NULL; V.rho = rho; V.sn = sn; V.scale = scale; V.lo = lo; V.add_normal = add_normal;
    Py_BEGIN_ALLOW_THREADS
    vm_run(&V);
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
    goto done;
malformed:
    PyErr_SetString(PyExc_ValueError, "numstd._native.model_eval: an instruction is out of range");
done:
    for (Py_ssize_t k = 0; k < got; k++) PyBuffer_Release(&varr[k]);
    PyBuffer_Release(&vval); PyBuffer_Release(&vrf); PyBuffer_Release(&vcode); PyBuffer_Release(&vconst);
    PyBuffer_Release(&ve); PyBuffer_Release(&vb);  /* (no-ops for views never taken: obj NULL) */
    return result;
}

/* halving_rows(x, out, depth): out[j] = the sum of row j of x (rows of n float64 values, C order) by
 * the balanced tree of numstd.reference.summation.halving_sum: the row zero-padded to 2^depth
 * terms (2^depth >= n), then halved depth times, a[i] = a[i] + a[i + h] for i < h: the same
 * additions in the same order as the numpy path, so the same bits. */
static PyObject *halving_rows(PyObject *self, PyObject *args) {
    PyObject *ox, *oout;
    int depth;
    if (!PyArg_ParseTuple(args, "OOi", &ox, &oout, &depth)) return NULL;
    if (depth < 0 || depth > 40) {
        PyErr_SetString(PyExc_ValueError, "numstd._native.halving_rows: depth out of range");
        return NULL;
    }
    Py_buffer vx = {0}, vo = {0};
    PyObject *result = NULL;
    if (PyObject_GetBuffer(ox, &vx, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(oout, &vo, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
    Py_ssize_t rows = vo.len / 8, width = (Py_ssize_t)1 << depth;
    if (rows == 0 || vx.len % (8 * rows) || vx.len / (8 * rows) > width || vx.len / (8 * rows) < 1) {
        PyErr_SetString(PyExc_ValueError, "numstd._native.halving_rows: x must hold rows of 1..2^depth float64 values");
        goto done;
    }
    {
        Py_ssize_t n = vx.len / (8 * rows);
        const double *x = vx.buf;
        double *out = vo.buf;
        double *buf = malloc(8 * (size_t)width);
        if (!buf) { PyErr_NoMemory(); goto done; }
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t j = 0; j < rows; j++) {
            memcpy(buf, x + j * n, 8 * (size_t)n);
            for (Py_ssize_t i = n; i < width; i++) buf[i] = 0.0;
            halve(buf, width);
            out[j] = buf[0];
        }
        Py_END_ALLOW_THREADS
        free(buf);
        result = Py_None;
        Py_INCREF(result);
    }
done:
    PyBuffer_Release(&vx);
    if (vo.obj) PyBuffer_Release(&vo);
    return result;
}

/* hist_add(ae, hist): hist[bin_of(ae_i)] += 1 for the n float64 values ae (|ULP errors|, >= 0), hist
 * an int64 array of NBINS counts (numstd.distribution.DistributionAccumulator.add; its numpy path,
 * np.bincount of numstd.distribution._bin_index, is the specification). */
static PyObject *hist_add(PyObject *self, PyObject *args) {
    PyObject *oa, *oh;
    if (!PyArg_ParseTuple(args, "OO", &oa, &oh)) return NULL;
    if (!thresholds_set) {
        PyErr_SetString(PyExc_RuntimeError, "numstd._native.hist_add: set_thresholds was not called");
        return NULL;
    }
    Py_buffer va = {0}, vh = {0};
    PyObject *result = NULL;
    if (PyObject_GetBuffer(oa, &va, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(oh, &vh, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (va.len % 8 || vh.len != 8 * (Py_ssize_t)NBINS) {
        PyErr_SetString(PyExc_ValueError, "numstd._native.hist_add: need float64 values and NBINS int64 counts");
        goto done;
    }
    {
        Py_ssize_t n = va.len / 8;
        const double *a = va.buf;
        int64_t *h = vh.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) h[bin_of(a[i])]++;
        Py_END_ALLOW_THREADS
        result = Py_None;
        Py_INCREF(result);
    }
done:
    PyBuffer_Release(&va);
    if (vh.obj) PyBuffer_Release(&vh);
    return result;
}

/* finish_bound(bound, values, out, inflate): out = bound * inflate, +inf where that is NaN, 0 where
 * values is not finite (numstd.reference._finish_bound). */
static PyObject *finish_bound(PyObject *self, PyObject *args) {
    PyObject *ob, *ov, *oout;
    double inflate;
    if (!PyArg_ParseTuple(args, "OOOd", &ob, &ov, &oout, &inflate)) return NULL;
    Py_buffer vb = {0}, vv = {0}, vo = {0};
    PyObject *result = NULL;
    if (PyObject_GetBuffer(oout, &vo, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    Py_ssize_t n = vo.len / 8;
    if (get_f64(ob, &vb, n, "bound", 0) < 0) goto done;
    if (get_f64(ov, &vv, n, "values", 0) < 0) goto done;
    {
        const double *b = vb.buf, *v = vv.buf;
        double *out = vo.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            double x = b[i] * inflate;
            if (isnan(x)) x = INFINITY;
            out[i] = isfinite(v[i]) ? x : 0.0;
        }
        Py_END_ALLOW_THREADS
        Py_INCREF(Py_None);
        result = Py_None;
    }
done:
    PyBuffer_Release(&vb); PyBuffer_Release(&vv); PyBuffer_Release(&vo);
    return result;
}

/* dot_bound(absdot, out, g, t, rel) -> whether every out_i <= rel * absdot_i:
 * out = g * absdot + t, the float64 GEMM bound of numstd.reference.contraction.dot. */
static PyObject *dot_bound(PyObject *self, PyObject *args) {
    PyObject *oa, *oout;
    double g, t, rel;
    if (!PyArg_ParseTuple(args, "OOddd", &oa, &oout, &g, &t, &rel)) return NULL;
    Py_buffer va = {0}, vo = {0};
    if (PyObject_GetBuffer(oout, &vo, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    Py_ssize_t n = vo.len / 8;
    if (get_f64(oa, &va, n, "absdot", 0) < 0) { PyBuffer_Release(&vo); return NULL; }
    const double *a = va.buf;
    double *out = vo.buf;
    int all_le = 1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        double b = g * a[i] + t;
        out[i] = b;
        all_le &= b <= rel * a[i];
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&va); PyBuffer_Release(&vo);
    return PyBool_FromLong(all_le);
}

/* constants() -> the layout constants this file was compiled with (numstd.native checks them
 * against the Python modules, so the two paths cannot drift apart silently) */
static PyObject *constants(PyObject *self, PyObject *args) {
    return Py_BuildValue("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "BLOCK", BLOCK, "WORST_K", WORST_K, "DISTINCT_BITS",
                         DISTINCT_BITS, "BINS_PER_OCTAVE", BINS_PER_OCTAVE, "LO_OCT", LO_OCT, "HI_OCT", HI_OCT,
                         "VM_REGS", VM_REGS, "VM_ARRAYS", VM_ARRAYS);
}

static PyMethodDef methods[] = {
    {"constants", constants, METH_NOARGS, "The layout constants the module was compiled with."},
    {"judge", judge, METH_VARARGS, "Fused per-element judging of one chunk (see the module source)."},
    {"set_thresholds", set_thresholds, METH_VARARGS, "Set the 15 fraction thresholds of the histogram bins."},
    {"spacing", spacing, METH_VARARGS, "ulp(r) of float64 values in a format (see the module source)."},
    {"model_bound", model_bound, METH_VARARGS, "The per-element bound of an error model in one pass (see the module source)."},
    {"model_eval", model_eval, METH_VARARGS, "A compiled error formula and its bound in one pass (see the module source)."},
    {"finish_bound", finish_bound, METH_VARARGS, "A reference's final bound in one pass (see the module source)."},
    {"halving_rows", halving_rows, METH_VARARGS, "Row sums by the balanced halving tree (see the module source)."},
    {"hist_add", hist_add, METH_VARARGS, "Add |ULP errors| to the fine histogram (see the module source)."},
    {"dot_bound", dot_bound, METH_VARARGS, "The float64 GEMM bound and its slack test in one pass (see the module source)."},
#ifdef NUMSTD_NUMPY_POOL
    {"pool_enter", pool_enter, METH_VARARGS, "pool_enter(max_bytes): install the block-reusing numpy allocator in this context."},
    {"pool_exit", pool_exit, METH_VARARGS, "Restore the previous allocator; the last user frees the kept blocks."},
    {"pool_stats", pool_stats, METH_VARARGS, "pool_stats(reset=False) -> (blocks kept, bytes kept, peak kept, bytes held, peak held)."},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_native", "Compiled loops of numstd (numstd.native).", -1, methods};

PyMODINIT_FUNC PyInit__native(void) {
#ifdef NUMSTD_NUMPY_POOL
    import_array();
    pool_lock = PyThread_allocate_lock();
    if (!pool_lock) return PyErr_NoMemory();
    pool_capsule = PyCapsule_New(&pool_handler, "mem_handler", NULL);
    if (!pool_capsule) return NULL;
#endif
    return PyModule_Create(&moduledef);
}
