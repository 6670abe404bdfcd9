//! Ops defined by random draws: Dropout (contract section `dropout`).
//!
//! Dropout is the identity in inference (opset < 12: always, the `is_test` / `ratio`
//! attributes notwithstanding; from opset 12: unless `training_mode` is true) and in training
//! with `ratio = 0`; then the mask is all true. Training with `ratio > 0` and a `seed` draws
//! one number per element from [`Mt19937`], the stream of NumPy's `RandomState(seed)`, which
//! is what ONNX's reference uses; without a seed it is unsupported (no unseeded stream).

use super::cast::cast_tensor;
use super::numeric::{Real, with_real_type};
use crate::registry::Registry;
use crate::{Inputs, InputsExt, NodeArgs, Op, Result, bail, unsupported};
use samebits_ir::{DType, Tensor, Value, ValueType};

pub fn register(r: &mut Registry) {
    r.register("", "Dropout", |ctx| {
        let seed = NodeArgs::new(ctx.node).int("seed")?;
        let seed = seed
            .map(|s| {
                u32::try_from(s).map_err(|_| {
                    crate::OpError::Invalid(format!(
                        "attribute \"seed\" must be in [0, 2^32), got {s}"
                    ))
                })
            })
            .transpose()?;
        Ok(Box::new(Dropout {
            inputs_select_training: ctx.opset >= 12,
            bool_mask: ctx.opset >= 10,
            seed,
        }))
    });
}

/// The 32-bit Mersenne Twister as NumPy's legacy `RandomState(seed)` runs it: seeded by
/// `init_genrand`, doubles in `[0, 1)` made of two draws (`random_sample`).
struct Mt19937 {
    state: [u32; 624],
    next: usize,
}

impl Mt19937 {
    fn new(seed: u32) -> Mt19937 {
        let mut state = [0u32; 624];
        state[0] = seed;
        for i in 1..624 {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { state, next: 624 }
    }

    /// Regenerates the 624 words in place (each update reads the words already updated).
    fn twist(&mut self) {
        for i in 0..624 {
            let y = (self.state[i] & 0x8000_0000) | (self.state[(i + 1) % 624] & 0x7fff_ffff);
            let mut v = self.state[(i + 397) % 624] ^ (y >> 1);
            if y & 1 != 0 {
                v ^= 0x9908_b0df;
            }
            self.state[i] = v;
        }
        self.next = 0;
    }

    fn next_u32(&mut self) -> u32 {
        if self.next == 624 {
            self.twist();
        }
        let mut y = self.state[self.next];
        self.next += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `(a >> 5) * 2^26 + (b >> 6)` over `2^53`: exact in f64.
    fn next_f64(&mut self) -> f64 {
        let a = (self.next_u32() >> 5) as f64;
        let b = (self.next_u32() >> 6) as f64;
        (a * 67_108_864.0 + b) / 9_007_199_254_740_992.0
    }
}

#[derive(Debug)]
struct Dropout {
    /// Opset 12+: `ratio` and `training_mode` are inputs 1 and 2.
    inputs_select_training: bool,
    /// Opset 10+: the mask is bool; before, it has the input's dtype.
    bool_mask: bool,
    seed: Option<u32>,
}

impl Dropout {
    /// The ratio when this evaluation drops anything (training mode, non-zero ratio).
    fn drop_ratio(&self, inputs: &Inputs) -> Result<Option<f64>> {
        if !self.inputs_select_training {
            return Ok(None);
        }
        let training = match inputs.opt_tensor(2)? {
            None => false,
            Some(t) => match t.as_bools() {
                Ok([b]) => *b != 0,
                _ => bail!(
                    "input 2 (training_mode) must be one bool, got a {} tensor of shape {:?}",
                    t.dtype(),
                    t.shape()
                ),
            },
        };
        let ratio = match inputs.opt_tensor(1)? {
            None => 0.5,
            Some(t) => match t.to_f64_vec()?.as_slice() {
                [r] => *r,
                _ => bail!(
                    "input 1 (ratio) must be one number, got shape {:?}",
                    t.shape()
                ),
            },
        };
        if !(0.0..1.0).contains(&ratio) {
            bail!("input 1 (ratio) must be in [0, 1), got {ratio}");
        }
        Ok((training && ratio != 0.0).then_some(ratio))
    }

    /// Training-mode dropout: element `k` is kept when the `k`-th draw `u >= ratio`, and then
    /// becomes `x * (1 / (1 - ratio))`, else `0`.
    fn drop_as<R: Real>(&self, x: &Tensor, ratio: f64, seed: u32) -> Result<(Tensor, Tensor)> {
        let mut stream = Mt19937::new(seed);
        let r = R::from_f64(ratio);
        let scale = R::ONE / (R::ONE - r);
        let data = R::read(x, "input 0")?;
        let mut keep = Vec::with_capacity(data.len());
        let y: Vec<R> = data
            .iter()
            .map(|&v| {
                let kept = stream.next_f64() >= ratio;
                keep.push(kept);
                if kept { v * scale } else { R::ZERO }
            })
            .collect();
        Ok((
            R::store(x.dtype(), x.shape().to_vec(), y)?,
            Tensor::from_bools(x.shape().to_vec(), keep)?,
        ))
    }
}

impl Op for Dropout {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let x = inputs.first().cloned().flatten();
        let shape = x.as_ref().and_then(|t| t.shape().cloned());
        let mask_dtype = if self.bool_mask {
            Some(DType::Bool)
        } else {
            x.as_ref().and_then(|t| t.dtype())
        };
        Ok(vec![
            x.clone(),
            mask_dtype.map(|d| ValueType::tensor(d, shape)),
        ])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        if let Some(ratio) = self.drop_ratio(inputs)? {
            let Some(seed) = self.seed else {
                unsupported!("Dropout in training mode without a seed (no unseeded stream)")
            };
            let (y, mask) = with_real_type!(x.dtype(), R => self.drop_as::<R>(x, ratio, seed)?,
                else unsupported!("Dropout in training mode of {} tensors", x.dtype()));
            return Ok(vec![y.into(), mask.into()]);
        }
        let ones = Tensor::from_bools(x.shape().to_vec(), vec![true; x.numel()])?;
        let mask = if self.bool_mask {
            ones
        } else {
            cast_tensor(&ones, x.dtype())?
        };
        Ok(vec![x.clone().into(), mask.into()])
    }
}

#[cfg(test)]
mod tests {
    use super::Mt19937;

    #[test]
    fn stream_matches_the_reference_generators() {
        // MT19937's reference: the first output of init_genrand(5489) is 3499211612.
        assert_eq!(Mt19937::new(5489).next_u32(), 3_499_211_612);
        // NumPy: np.random.RandomState(0).random_sample() == 0.5488135039273248.
        assert_eq!(Mt19937::new(0).next_f64(), 0.548_813_503_927_324_8);
    }
}
