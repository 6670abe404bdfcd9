//! Object-detection post-processing: NonMaxSuppression (opsets 10 and 11).
//!
//! Implements contract section `nonmaxsuppression`: per (batch, class), candidate boxes are
//! ordered by score (highest first, the lower box index first on ties, scores compared as
//! `f32::total_cmp` orders them) and taken greedily while none already taken overlaps them with
//! an intersection over union above the threshold; IoU is f32 arithmetic in the order written
//! there. The output lists `[batch, class, box]` triples, batches then classes in order, boxes in
//! the order they were taken. No floating-point reduction is involved, so every device and
//! thread count gives the same indices.

use crate::registry::Registry;
use crate::staging::f32_values;
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, Result, bail};
use samebits_ir::{DType, Tensor, Value, ValueType};

pub fn register(r: &mut Registry) {
    r.register("", "NonMaxSuppression", non_max_suppression);
}

#[derive(Debug)]
struct NonMaxSuppression {
    /// Boxes are `[x_center, y_center, width, height]` (else `[y1, x1, y2, x2]`, either
    /// corner pair).
    center_point_box: bool,
}

fn non_max_suppression(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let center = NodeArgs::new(ctx.node).int_or("center_point_box", 0)?;
    if !matches!(center, 0 | 1) {
        bail!("NonMaxSuppression: attribute \"center_point_box\" must be 0 or 1, got {center}");
    }
    Ok(Box::new(NonMaxSuppression {
        center_point_box: center == 1,
    }))
}

/// A box as its x and y extents `(min, max)`.
#[derive(Clone, Copy, Debug)]
struct Extent {
    x: (f32, f32),
    y: (f32, f32),
}

impl NonMaxSuppression {
    fn extent(&self, b: &[f32]) -> Extent {
        let ordered = |a: f32, b: f32| if a >= b { (b, a) } else { (a, b) };
        if self.center_point_box {
            let (half_w, half_h) = (b[2] / 2.0, b[3] / 2.0);
            Extent {
                x: (b[0] - half_w, b[0] + half_w),
                y: (b[1] - half_h, b[1] + half_h),
            }
        } else {
            Extent {
                x: ordered(b[1], b[3]),
                y: ordered(b[0], b[2]),
            }
        }
    }
}

/// True when `a` and `b` overlap with an intersection over union above `threshold`.
fn overlaps(a: Extent, b: Extent, threshold: f32) -> bool {
    let x = (a.x.0.max(b.x.0), a.x.1.min(b.x.1));
    let y = (a.y.0.max(b.y.0), a.y.1.min(b.y.1));
    if x.1 <= x.0 || y.1 <= y.0 {
        return false;
    }
    let intersection = (x.1 - x.0) * (y.1 - y.0);
    let area_a = (a.x.1 - a.x.0) * (a.y.1 - a.y.0);
    let area_b = (b.x.1 - b.x.0) * (b.y.1 - b.y.0);
    let union = area_a + area_b - intersection;
    if intersection <= 0.0 || area_a <= 0.0 || area_b <= 0.0 || union <= 0.0 {
        return false;
    }
    intersection / union > threshold
}

/// An optional scalar (or one-element) input.
fn scalar_f32(inputs: &Inputs, i: usize, name: &str) -> Result<Option<f32>> {
    match inputs.opt_tensor(i)? {
        None => Ok(None),
        Some(t) if t.numel() == 0 => Ok(None),
        Some(t) if t.numel() == 1 => Ok(Some(f32_values(t, name)?[0])),
        Some(t) => bail!(
            "NonMaxSuppression: {name} must hold one value, got shape {:?}",
            t.shape()
        ),
    }
}

impl Op for NonMaxSuppression {
    fn infer(&self, _inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![Some(ValueType::tensor(DType::I64, None))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (boxes, scores) = (inputs.tensor(0)?, inputs.tensor(1)?);
        let (bs, ss) = (boxes.shape(), scores.shape());
        let [batches, count, 4] = *bs else {
            bail!("NonMaxSuppression: boxes must be [batches, boxes, 4], got {bs:?}");
        };
        let [score_batches, classes, score_boxes] = *ss else {
            bail!("NonMaxSuppression: scores must be [batches, classes, boxes], got {ss:?}");
        };
        if score_batches != batches || score_boxes != count {
            bail!(
                "NonMaxSuppression: scores {ss:?} must be [{batches}, classes, {count}] for \
                 boxes {bs:?}"
            );
        }
        let keep = match inputs.opt_ints(2, "max_output_boxes_per_class")? {
            None => 0,
            Some(v) if v.is_empty() => 0,
            Some(v) if v.len() == 1 => usize::try_from(v[0].max(0)).unwrap_or(usize::MAX),
            Some(v) => bail!(
                "NonMaxSuppression: max_output_boxes_per_class must hold one value, got {} values",
                v.len()
            ),
        };
        let iou_threshold = scalar_f32(inputs, 3, "iou_threshold")?.unwrap_or(0.0);
        let score_threshold = scalar_f32(inputs, 4, "score_threshold")?;
        let box_values = f32_values(boxes, "NonMaxSuppression boxes")?;
        let score_values = f32_values(scores, "NonMaxSuppression scores")?;
        let mut selected: Vec<i64> = Vec::new();
        for b in 0..batches {
            let extents: Vec<Extent> = (0..count)
                .map(|i| self.extent(&box_values[(b * count + i) * 4..][..4]))
                .collect();
            for c in 0..classes {
                let class_scores = &score_values[(b * classes + c) * count..][..count];
                let mut candidates: Vec<usize> = (0..count)
                    .filter(|&i| score_threshold.is_none_or(|t| class_scores[i] > t))
                    .collect();
                candidates
                    .sort_by(|&i, &j| class_scores[j].total_cmp(&class_scores[i]).then(i.cmp(&j)));
                let mut taken: Vec<usize> = Vec::new();
                for i in candidates {
                    if taken.len() >= keep {
                        break;
                    }
                    if taken
                        .iter()
                        .all(|&t| !overlaps(extents[i], extents[t], iou_threshold))
                    {
                        taken.push(i);
                        selected.extend([b as i64, c as i64, i as i64]);
                    }
                }
            }
        }
        let rows = selected.len() / 3;
        Ok(vec![Tensor::from_vec(vec![rows, 3], selected)?.into()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iou_follows_the_areas() {
        let op = NonMaxSuppression {
            center_point_box: false,
        };
        let a = op.extent(&[0.0, 0.0, 1.0, 1.0]);
        let b = op.extent(&[0.0, 0.5, 1.0, 1.5]);
        // Intersection 0.5, union 1.5: IoU 1/3.
        assert!(overlaps(a, b, 0.3));
        assert!(!overlaps(a, b, 0.34));
        // Corners given in either order describe the same box.
        let flipped = op.extent(&[1.0, 1.0, 0.0, 0.0]);
        assert!(overlaps(a, flipped, 0.99));
        // Touching edges do not overlap.
        assert!(!overlaps(a, op.extent(&[0.0, 1.0, 1.0, 2.0]), 0.0));
    }
}
