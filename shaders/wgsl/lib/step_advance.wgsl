// Library snippet, not a family: a family's line "// include: step_advance"
// is replaced by what follows (shaders.expandIncludes). The family binds
// the step tensor read_write as step (array<u32>) and has p.advance.

// advance_step is wgsl/step.wgsl's advance kernel folded into a picking
// kernel (argmax, sample): with p.advance set, the step buffer is a
// shaders.DecodeStep and the one invocation holding the picked id calls it
// after the workgroup's last barrier, when every invocation has read the
// step words it needs. It stores id in ids[count] and, unless id is a
// stop id or this was the submission's last step, makes it the next
// token at the next position; a stop id or the last step sets done and
// clears the rows, so the submission's remaining steps do no work. The
// step's index in the submission is its count of ids so far (the host
// writes 0), the same index advance's uniform block gives: every step
// before a done one stored one id. A one-step Run writes steps 0: no
// change.
fn advance_step(id: u32) {
    if p.advance == 0u {
        return;
    }
    let i = step[STEP_COUNT];
    if step[STEP_DONE] != 0u || step[STEP_ROWS] == 0u || i >= step[STEP_STEPS] || i >= MAX_STEPS {
        return;
    }
    step[STEP_IDS + i] = id;
    step[STEP_COUNT] = i + 1u;
    step[STEP_VALID_LEN] = step[STEP_POS] + 1u;
    for (var s = 0u; s < min(step[STEP_N_STOPS], MAX_STOPS); s++) {
        if step[STEP_STOPS + s] == id {
            step[STEP_DONE] = STEP_STOPPED;
            step[STEP_ROWS] = 0u;
            return;
        }
    }
    if i + 1u >= step[STEP_STEPS] {
        step[STEP_DONE] = STEP_LAST;
        step[STEP_ROWS] = 0u;
        return;
    }
    step[STEP_TOKEN] = id;
    step[STEP_POS] = step[STEP_POS] + 1u;
}

// step_word_uniform is step[w] read by invocation 0 and loaded by every
// invocation with workgroupUniformLoad: the step buffer is read_write (the
// pick advances it), so WGSL's uniformity analysis counts its words as
// non-uniform, and a branch on one ahead of a barrier makes Tint (the
// browser's compiler) reject the module; naga does not check this. Call it
// from uniform control flow, before invocation 0 may write step.
var<workgroup> step_word_wg: u32;

fn step_word_uniform(l: u32, w: u32) -> u32 {
    if l == 0u {
        step_word_wg = step[w];
    }
    return workgroupUniformLoad(&step_word_wg);
}
