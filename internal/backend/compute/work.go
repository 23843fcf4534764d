package compute

import "github.com/gpurun/gpurun/fusion"

// opWork is the work of an op that is not a matrix product (the planner
// counts those per dispatch with matCost), for profiles: the bytes it must
// move at least and its floating point operations, for a step of T tokens
// from position pos with a cache of kvElem bytes per value. Reads of an
// activation buffer count the rows the step uses (T, or 1 for one-row
// buffers), each value 4 bytes; element-wise ops count one operation per
// output value (Norm three), Attention 4 per head, attended position and
// head dimension (a multiply-add for the score, one for the value),
// ShortConv 2*width+2 per channel and token, Mamba2 2*width per
// convolution channel, 4 per state value and 4 per output per token,
// DeltaNet 2*width+2 per channel (the convolution, its SiLU and norms),
// 6 per state value (decay, the read of S^T k, the update and S^T q) and
// 4 per value head per token, SigmoidGate 4 per output value.
// Rotations, embeddings, copies and picks count none: they move bytes.
func opWork(g *fusion.Graph, op fusion.Op, pos, T int, kvElem int64) cost {
	rows := func(b fusion.Buf) int64 {
		if g.Bufs[b].Rows == 1 {
			return 1
		}
		return int64(T)
	}
	act := func(b fusion.Buf) int64 { return rows(b) * int64(g.Bufs[b].Cols) * 4 }
	var c cost
	for _, b := range op.Inputs() {
		c.Bytes += act(b)
	}
	for _, b := range op.Outputs() {
		c.Bytes += act(b)
	}
	switch op := op.(type) {
	case *fusion.EmbedOp:
		// The table rows of the step's tokens.
		c.Bytes += int64(T) * int64(g.Bufs[op.Out].Cols) * 4
	case *fusion.NormOp:
		n := rows(op.Out) * int64(g.Bufs[op.Out].Cols)
		c.Bytes += int64(g.Bufs[op.Out].Cols) * 4
		c.FLOPs = 3 * n
	case *fusion.AddOp, *fusion.GLUOp, *fusion.ActivationOp, *fusion.SoftCapOp:
		out := op.Outputs()[0]
		c.FLOPs = rows(out) * int64(g.Bufs[out].Cols)
	case *fusion.StoreKVOp:
		c.Bytes += 2 * int64(T) * int64(op.KVHeads*op.HeadDim) * kvElem
	case *fusion.RopeStoreKVOp:
		// The in-place rotation of Q writes it back; K and V go to the cache.
		c.Bytes += act(op.Q) + 2*int64(T)*int64(op.KVHeads*op.HeadDim)*kvElem
	case *fusion.AttentionOp:
		// Every cached key and value the step attends, read once per KV
		// head (the query heads of a group share them), and the scores'
		// and values' multiply-adds for every query head and token.
		first, last := 0, pos+T // positions [first, last) any row attends
		if op.Window > 0 {
			first = max(0, pos-op.Window+1)
		}
		c.Bytes += 2 * int64(last-first) * int64(op.KVHeads*op.HeadDim) * kvElem
		for t := range T {
			n := pos + t + 1
			if op.Window > 0 {
				n = min(n, op.Window)
			}
			c.FLOPs += 4 * int64(op.Heads) * int64(n) * int64(op.HeadDim)
		}
	case *fusion.Mamba2Op:
		// The taps, the state's window and matrices read and written,
		// and per row the convolution (2*width per channel), the scan
		// (4 per state value) and the gate and norm (4 per output).
		cc, w := int64(op.ConvChannels()), int64(op.Width)
		m := int64(op.Inner) * int64(op.State)
		c.Bytes += cc*w*4 + 2*(cc*(w-1)+m)*4
		c.FLOPs = int64(T) * (cc*2*w + 4*m + 4*int64(op.Inner))
	case *fusion.DeltaNetOp:
		// The taps, the state's window and matrices read and written.
		ch, w := int64(op.Channels()), int64(op.Width)
		m := int64(op.ValueHeads) * int64(op.HeadDim) * int64(op.HeadDim)
		c.Bytes += ch*w*4 + 2*(ch*(w-1)+m)*4
		c.FLOPs = int64(T) * (ch*(2*w+2) + 6*m + 4*int64(op.ValueHeads))
	case *fusion.SigmoidGateOp:
		c.FLOPs = 4 * rows(op.Out) * int64(g.Bufs[op.Out].Cols)
	case *fusion.ShortConvOp:
		// The taps (as f32), the state read and written, and per row and
		// channel B*x, the taps' multiply-adds and the C gate.
		ch, w := int64(op.Channels), int64(op.Width)
		c.Bytes += ch*w*4 + 2*ch*(w-1)*4
		c.FLOPs = int64(T) * ch * (2*w + 2)
	}
	return c
}
