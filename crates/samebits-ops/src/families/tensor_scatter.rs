//! TensorScatter (opset 24): writes `update` into a copy of `past_cache` along the sequence
//! axis, at a per-batch-row offset (`write_indices`), linearly or circularly (a KV-cache
//! update). Pure data movement: elements are copied as bytes, so every dtype but strings gives
//! the same bits everywhere. On a GPU the step runs this CPU op.

use crate::registry::Registry;
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, Result, bail, unsupported};
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{DType, Tensor, Value, ValueType};

pub fn register(r: &mut Registry) {
    r.register("", "TensorScatter", TensorScatter::build);
}

#[derive(Debug)]
struct TensorScatter {
    axis: i64,
    circular: bool,
}

impl TensorScatter {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        let circular = match args.string_or("mode", "linear".into())?.as_str() {
            "linear" => false,
            "circular" => true,
            other => {
                bail!("TensorScatter: attribute \"mode\" must be linear or circular, got {other:?}")
            }
        };
        Ok(Box::new(TensorScatter {
            axis: args.int_or("axis", -2)?,
            circular,
        }))
    }
}

impl Op for TensorScatter {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![inputs.first().cloned().flatten()])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (cache, update) = (inputs.tensor(0)?, inputs.tensor(1)?);
        if cache.dtype() == DType::String {
            unsupported!("TensorScatter of string tensors");
        }
        if update.dtype() != cache.dtype() {
            bail!(
                "TensorScatter: input 1 (update) has dtype {}, input 0 (past_cache) {}",
                update.dtype(),
                cache.dtype()
            );
        }
        let (cs, us) = (cache.shape(), update.shape());
        let rank = cs.len();
        let axis = if self.axis < 0 {
            self.axis + rank as i64
        } else {
            self.axis
        };
        if rank < 2 || axis < 1 || axis >= rank as i64 {
            bail!(
                "TensorScatter: attribute \"axis\" {} must name a non-batch axis of past_cache \
                 of shape {cs:?}",
                self.axis
            );
        }
        let axis = axis as usize;
        let same_elsewhere = (0..rank).all(|a| a == axis || cs.get(a) == us.get(a));
        if us.len() != rank || !same_elsewhere || us[axis] > cs[axis] {
            bail!(
                "TensorScatter: input 1 (update) of shape {us:?} must match past_cache {cs:?} \
                 except along axis {axis}, where it may not be longer"
            );
        }
        let batch = cs[0];
        let offsets = match inputs.opt_ints(2, "write_indices")? {
            None => vec![0; batch],
            Some(w) if w.len() == batch => w,
            Some(w) => bail!(
                "TensorScatter: input 2 (write_indices) has {} values for batch {batch}",
                w.len()
            ),
        };
        let (max_seq, seq) = (cs[axis], us[axis]);
        for (b, &w) in offsets.iter().enumerate() {
            let fits = match self.circular {
                true => w >= 0 && (w as u64) < max_seq.max(1) as u64,
                false => w >= 0 && (w as u64).saturating_add(seq as u64) <= max_seq as u64,
            };
            if !fits {
                bail!(
                    "TensorScatter: write_indices[{b}] = {w} does not fit {seq} updates in a \
                     sequence axis of {max_seq} ({} mode)",
                    if self.circular { "circular" } else { "linear" }
                );
            }
        }
        check_tensor_size("TensorScatter output", cs, cache.dtype())?;
        let size = cache.dtype().size();
        // Row-major: [batch, middle, seq axis, inner elements].
        let middle: usize = cs[1..axis].iter().product();
        let inner: usize = cs[axis + 1..].iter().product::<usize>() * size;
        let mut out = cache.bytes()?.to_vec();
        let src = update.bytes()?;
        for (b, &w) in offsets.iter().enumerate() {
            for m in 0..middle {
                for i in 0..seq {
                    let at = match self.circular {
                        true => (w as usize + i) % max_seq,
                        false => w as usize + i,
                    };
                    let from = ((b * middle + m) * seq + i) * inner;
                    let to = ((b * middle + m) * max_seq + at) * inner;
                    out[to..to + inner].copy_from_slice(&src[from..from + inner]);
                }
            }
        }
        Ok(vec![
            Tensor::from_le_bytes(cache.dtype(), cs.to_vec(), &out)?.into(),
        ])
    }
}
