//! [`OpError`]: errors raised while building or evaluating ops. The interpreter prefixes each
//! with the node it came from, so a message reads `Conv node "conv_1": input 1 ...`.

#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// The op (or this form of it: a dtype, an attribute value) is not implemented.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The node or its inputs are invalid (bad attribute, wrong shape, wrong dtype).
    #[error("{0}")]
    Invalid(String),
    /// An error located at a node: the node's description and the error.
    #[error("{node}: {source}")]
    AtNode {
        node: String,
        #[source]
        source: Box<OpError>,
    },
    /// A plan specialised to its inputs' shapes met a value whose shape differs from the one
    /// it was specialised for (the value's shape depends on data): the caller runs the
    /// unspecialised plan instead.
    #[error("value \"{value}\" has shape {got:?}; the plan was specialised for {expected:?}")]
    ShapeGuard {
        value: String,
        expected: Vec<usize>,
        got: Vec<usize>,
    },
}

impl OpError {
    /// Wraps the error with the node it happened at (once: an inner node location wins).
    pub fn at(self, node: &str) -> OpError {
        match self {
            e @ OpError::AtNode { .. } => e,
            e => OpError::AtNode {
                node: node.to_string(),
                source: Box::new(e),
            },
        }
    }

    /// True when the root cause is a missing implementation.
    pub fn is_unsupported(&self) -> bool {
        match self {
            OpError::Unsupported(_) => true,
            OpError::AtNode { source, .. } => source.is_unsupported(),
            OpError::Invalid(_) | OpError::ShapeGuard { .. } => false,
        }
    }

    /// True when the root cause is a failed shape guard of a specialised plan.
    pub fn is_shape_guard(&self) -> bool {
        match self {
            OpError::ShapeGuard { .. } => true,
            OpError::AtNode { source, .. } => source.is_shape_guard(),
            OpError::Unsupported(_) | OpError::Invalid(_) => false,
        }
    }
}

impl From<samebits_ir::Error> for OpError {
    fn from(e: samebits_ir::Error) -> OpError {
        OpError::Invalid(e.to_string())
    }
}

pub type Result<T, E = OpError> = std::result::Result<T, E>;

/// `Err(OpError::Invalid(format!(...)))`.
#[macro_export]
macro_rules! bail {
    ($($arg:tt)*) => { return Err($crate::OpError::Invalid(format!($($arg)*))) };
}

/// `Err(OpError::Unsupported(format!(...)))`.
#[macro_export]
macro_rules! unsupported {
    ($($arg:tt)*) => { return Err($crate::OpError::Unsupported(format!($($arg)*))) };
}
