//! The spatial geometry of a windowed op (convolution, transposed convolution, pooling) widened
//! to 3 axes with leading unit axes, so one 3-d loop nest serves 1-d, 2-d and 3-d tensors.

/// A spatial vector widened to 3 axes with leading `fill`.
pub(crate) fn widen(v: &[usize], fill: usize) -> [usize; 3] {
    let mut out = [fill; 3];
    out[3 - v.len()..].copy_from_slice(v);
    out
}

/// Spatial geometry widened to 3 axes (leading unit axes, no padding on them).
#[derive(Clone, Copy)]
pub(crate) struct Taps {
    pub(crate) input: [usize; 3],
    pub(crate) output: [usize; 3],
    pub(crate) kernel: [usize; 3],
    pub(crate) strides: [usize; 3],
    pub(crate) dilations: [usize; 3],
    pub(crate) pads_begin: [usize; 3],
}

impl Taps {
    pub(crate) fn new(
        input: &[usize],
        output: &[usize],
        kernel: &[usize],
        strides: &[usize],
        dilations: &[usize],
        pads_begin: &[usize],
    ) -> Taps {
        Taps {
            input: widen(input, 1),
            output: widen(output, 1),
            kernel: widen(kernel, 1),
            strides: widen(strides, 1),
            dilations: widen(dilations, 1),
            pads_begin: widen(pads_begin, 0),
        }
    }

    pub(crate) fn kernel_len(&self) -> usize {
        self.kernel.iter().product()
    }

    pub(crate) fn output_len(&self) -> usize {
        self.output.iter().product()
    }

    pub(crate) fn input_len(&self) -> usize {
        self.input.iter().product()
    }

    /// Row-major kernel tap `t` as per-axis offsets.
    pub(crate) fn tap(&self, t: usize) -> [usize; 3] {
        let [_, kh, kw] = self.kernel;
        [t / (kh * kw), t / kw % kh, t % kw]
    }

    /// The input index on axis `a` of tap `k` of output `o`, if it lies inside the input.
    pub(crate) fn input_index(&self, a: usize, o: usize, k: usize) -> Option<usize> {
        (o * self.strides[a] + k * self.dilations[a])
            .checked_sub(self.pads_begin[a])
            .filter(|&i| i < self.input[a])
    }

    /// The outputs `o` on the last axis whose tap `k` lies inside the input: the range where
    /// `pads_begin <= o * stride + k * dilation < pads_begin + input`.
    pub(crate) fn inner_outputs(&self, k: usize) -> std::ops::Range<usize> {
        let (s, offset, pad) = (self.strides[2], k * self.dilations[2], self.pads_begin[2]);
        let lo = pad.saturating_sub(offset).div_ceil(s);
        let hi = (pad + self.input[2])
            .checked_sub(offset)
            .map_or(0, |end| end.div_ceil(s))
            .min(self.output[2]);
        lo..hi.max(lo)
    }
}
