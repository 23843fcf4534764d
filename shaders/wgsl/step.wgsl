// advance: the end of one decode step of a multi-step submission
// (gpu.StepRunner). A decode program (one token, ending in fusion.Argmax or
// fusion.Sample, whose output picked[0] is the token id as an f32) is
// recorded N times into one command list, each copy followed by advance,
// which turns the step tensor st (the program's step buffer, a DecodeStep)
// into the next step's: it stores the picked id in ids[index], and unless
// the id is one of the stop ids or this was the submission's last step
// (index + 1 == steps), makes it the next token at the next position. A
// stop id or the last step sets done and clears tokens: every kernel of the
// decode step runs only rows t < tokens (step word 1), so the submission's
// remaining steps do no work, and advance itself returns on done. The
// sample kernel's draw counter is pos + tokens, as in a one-step Run.
// One invocation; dispatch (1, 1, 1). A decode program whose last op is
// its pick runs none: the picking kernel advances the step itself
// (lib/step_advance.wgsl, the same update, the index being st.count);
// this kernel serves a pick followed by other ops. The struct below is
// also the layout those kernels index as words (shaders.StepCount ...).

struct AdvanceParams {
    index: u32, // this step's index in the submission
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

struct DecodeStep {
    pos: u32,       // position of token (step word 0, read by every kernel)
    tokens: u32,    // rows to run: 1, or 0 once done (step word 1)
    token: u32,     // the token the step runs (step word 2)
    valid_len: u32, // cache positions holding keys and values after the last step run
    done: u32,      // 0 running, 1 a stop id was picked, 2 the last step ran
    count: u32,     // ids picked so far in this submission
    steps: u32,     // steps of this submission, at most MaxSteps
    n_stops: u32,   // stop ids in stops, at most MaxStops
    // The sampling rule of a program ending in fusion.Sample (the sample
    // kernel reads it here; its draw counter is pos + tokens).
    inv_temperature: f32,
    top_k: u32,
    top_p: f32,
    seed_lo: u32,
    seed_hi: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
    stops: array<u32, 8>,
    ids: array<u32, 64>,
}

@group(0) @binding(0) var<uniform> p: AdvanceParams;
@group(0) @binding(1) var<storage, read> picked: array<f32>;
@group(0) @binding(2) var<storage, read_write> st: DecodeStep;

@compute @workgroup_size(1)
fn advance() {
    if st.done != 0u || st.tokens == 0u || p.index >= st.steps || p.index >= 64u {
        return;
    }
    let id = u32(picked[0]);
    st.ids[p.index] = id;
    st.count = p.index + 1u;
    st.valid_len = st.pos + 1u;
    for (var i = 0u; i < min(st.n_stops, 8u); i++) {
        if st.stops[i] == id {
            st.done = 1u;
            st.tokens = 0u;
            return;
        }
    }
    if p.index + 1u >= st.steps {
        st.done = 2u;
        st.tokens = 0u;
        return;
    }
    st.token = id;
    st.pos = st.pos + 1u;
}
