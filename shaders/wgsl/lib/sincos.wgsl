// Library snippet, not a family: a family's line "// include: sincos"
// is replaced by what follows (shaders.expandIncludes).

// sincos is (sin x, cos x) to a few ulps for |x| < 8192, whatever the
// driver's sin and cos: Vulkan lets those err by 2^-11 (absolute) and only
// promises that much within [-pi, pi], and SwiftShader uses the latitude
// (rope angles reach the cache length in radians). x is reduced by
// multiples k of pi/2 split in three parts (Cody-Waite; the first two
// have few enough bits that k times them is exact), then Taylor series on
// [-pi/4, pi/4] and the quadrant of k pick signs and order.
fn sincos(x: f32) -> vec2<f32> {
    let k = round(x * 0.6366197723675814);
    let r = ((x - k * 1.5703125) - k * 0.0004837512969970703) - k * 7.549790126404332e-08;
    let r2 = r * r;
    let s = r + r * r2 * (-1.0 / 6.0 + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 + r2 * (1.0 / 362880.0))));
    let c = 1.0 - 0.5 * r2 + r2 * r2 * (1.0 / 24.0 + r2 * (-1.0 / 720.0 + r2 * (1.0 / 40320.0 + r2 * (-1.0 / 3628800.0))));
    switch u32(i32(k) & 3) {
        case 1u: { return vec2<f32>(c, -s); }
        case 2u: { return vec2<f32>(-s, -c); }
        case 3u: { return vec2<f32>(-c, s); }
        default: { return vec2<f32>(s, c); }
    }
}
