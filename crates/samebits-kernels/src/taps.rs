//! The spatial geometry of a windowed op (convolution, transposed convolution, pooling) widened
//! to 3 axes with leading unit axes, so one 3-d loop nest serves 1-d, 2-d and 3-d tensors.
//!
//! This is the one definition of that widening: the CPU kernels walk it, samebits-cuda converts
//! it to the device structs of kernels/conv.cu and kernels/pool.cu, and samebits-ops walks it for
//! MaxPool's indices and LpPool.

/// A spatial vector widened to 3 axes with leading `fill`.
pub fn widen(v: &[usize], fill: usize) -> [usize; 3] {
    let mut out = [fill; 3];
    out[3 - v.len()..].copy_from_slice(v);
    out
}

/// Spatial geometry widened to 3 axes (leading unit axes, no padding on them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taps {
    /// Input size per axis.
    pub input: [usize; 3],
    /// Output size per axis.
    pub output: [usize; 3],
    /// Kernel size per axis.
    pub kernel: [usize; 3],
    pub strides: [usize; 3],
    pub dilations: [usize; 3],
    /// Padding before the first input element per axis (0 on the widened axes).
    pub pads_begin: [usize; 3],
}

impl Taps {
    /// Widens 1 to 3 spatial axes; panics on more (the geometries check their rank first).
    pub fn new(
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

    pub fn kernel_len(&self) -> usize {
        self.kernel.iter().product()
    }

    pub fn output_len(&self) -> usize {
        self.output.iter().product()
    }

    pub fn input_len(&self) -> usize {
        self.input.iter().product()
    }

    /// Row-major kernel tap `t` as per-axis offsets.
    pub fn tap(&self, t: usize) -> [usize; 3] {
        let [_, kh, kw] = self.kernel;
        [t / (kh * kw), t / kw % kh, t % kw]
    }

    /// The input index on axis `a` of tap `k` of output `o`, if it lies inside the input.
    pub fn input_index(&self, a: usize, o: usize, k: usize) -> Option<usize> {
        (o * self.strides[a] + k * self.dilations[a])
            .checked_sub(self.pads_begin[a])
            .filter(|&i| i < self.input[a])
    }

    /// The outputs `o` on the last axis whose tap `k` lies inside the input: the range where
    /// `pads_begin <= o * stride + k * dilation < pads_begin + input`.
    pub fn inner_outputs(&self, k: usize) -> std::ops::Range<usize> {
        let (s, offset, pad) = (self.strides[2], k * self.dilations[2], self.pads_begin[2]);
        let lo = pad.saturating_sub(offset).div_ceil(s);
        let hi = (pad + self.input[2])
            .checked_sub(offset)
            .map_or(0, |end| end.div_ceil(s))
            .min(self.output[2]);
        lo..hi.max(lo)
    }

    /// Row-major output `o` of the (widened) output plane as per-axis positions.
    pub fn output_position(&self, o: usize) -> [usize; 3] {
        let [_, oh, ow] = self.output;
        [o / (oh * ow), o / ow % oh, o % ow]
    }

    /// Calls `f` with the input position of every tap of output `o` (row-major in the output
    /// plane) that lies inside the input, in row-major kernel order.
    pub fn for_each_tap(&self, o: usize, mut f: impl FnMut([usize; 3])) {
        let [od, oh, ow] = self.output_position(o);
        for kd in 0..self.kernel[0] {
            let Some(d) = self.input_index(0, od, kd) else {
                continue;
            };
            for kh in 0..self.kernel[1] {
                let Some(h) = self.input_index(1, oh, kh) else {
                    continue;
                };
                for kw in 0..self.kernel[2] {
                    if let Some(w) = self.input_index(2, ow, kw) {
                        f([d, h, w]);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tap of every output, from the definition `input = o * s + k * d - pad` with the
    /// out-of-range ones dropped, against `for_each_tap` (2-d, padded, strided and dilated).
    #[test]
    fn for_each_tap_walks_the_window_in_row_major_order() {
        let taps = Taps::new(&[5, 7], &[3, 4], &[2, 3], &[2, 2], &[2, 1], &[1, 1]);
        assert_eq!(taps.input, [1, 5, 7]);
        assert_eq!(taps.pads_begin, [0, 1, 1]);
        for o in 0..taps.output_len() {
            let (oh, ow) = (o / 4, o % 4);
            let mut expected = Vec::new();
            for kh in 0..2 {
                for kw in 0..3 {
                    let (h, w) = ((oh * 2 + kh * 2) as isize - 1, (ow * 2 + kw) as isize - 1);
                    if (0..5).contains(&h) && (0..7).contains(&w) {
                        expected.push([0, h as usize, w as usize]);
                    }
                }
            }
            let mut walked = Vec::new();
            taps.for_each_tap(o, |p| walked.push(p));
            assert_eq!(walked, expected, "output {o}");
        }
    }
}
