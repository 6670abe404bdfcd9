//! Optional ops (ONNX 1.22 semantics): Optional wraps a value or makes an empty optional;
//! OptionalHasElement and OptionalGetElement also accept a plain tensor or sequence (always
//! present) and, for OptionalHasElement, an omitted input (never present).

use crate::registry::Registry;
use crate::{BuildContext, Inputs, InputsExt, Op, Result, bail};
use samebits_ir::{Attribute, DType, Shape, Tensor, Value, ValueType};

pub fn register(r: &mut Registry) {
    r.register("", "Optional", optional);
    r.register("", "OptionalHasElement", |_| {
        Ok(Box::new(OptionalHasElement))
    });
    r.register("", "OptionalGetElement", |_| {
        Ok(Box::new(OptionalGetElement))
    });
}

/// Optional: `Some(input 0)`, or the empty optional of the `type` attribute.
#[derive(Debug)]
struct Optional {
    element_type: Option<ValueType>,
}

fn optional(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let has_input = ctx.node.inputs.first().is_some_and(|n| !n.is_empty());
    let element_type = match ctx.node.attributes.get("type") {
        Some(Attribute::Type(t)) => Some(t.clone()),
        Some(other) => bail!("attribute \"type\" should be type, got {}", other.kind()),
        None => None,
    };
    if !has_input && element_type.is_none() {
        bail!("Optional without an input needs the \"type\" attribute");
    }
    Ok(Box::new(Optional { element_type }))
}

impl Op for Optional {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        let element = inputs
            .first()
            .cloned()
            .flatten()
            .or_else(|| self.element_type.clone());
        Ok(vec![element.map(|t| ValueType::Optional(Box::new(t)))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let element = inputs.first().copied().flatten();
        if let (Some(Value::Tensor(t)), Some(ValueType::Tensor { dtype, .. })) =
            (element, &self.element_type)
            && t.dtype() != *dtype
        {
            bail!(
                "input 0 has dtype {}, attribute \"type\" says {dtype}",
                t.dtype()
            );
        }
        Ok(vec![Value::Optional(element.map(|v| Box::new(v.clone())))])
    }
}

#[derive(Debug)]
struct OptionalHasElement;

impl Op for OptionalHasElement {
    fn infer(&self, _: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![Some(ValueType::tensor(
            DType::Bool,
            Some(Shape::known(&[])),
        ))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let present = match inputs.first().copied().flatten() {
            None | Some(Value::Optional(None)) => false,
            Some(_) => true,
        };
        Ok(vec![Tensor::from_bools(vec![], vec![present])?.into()])
    }
}

#[derive(Debug)]
struct OptionalGetElement;

impl Op for OptionalGetElement {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![match inputs.first().cloned().flatten() {
            Some(ValueType::Optional(t)) => Some(*t),
            other => other,
        }])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        match inputs.value(0)? {
            Value::Optional(None) => bail!("input 0 is an empty optional"),
            Value::Optional(Some(v)) => Ok(vec![(**v).clone()]),
            v => Ok(vec![v.clone()]),
        }
    }
}
