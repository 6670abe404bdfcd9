//! String ops: StringNormalizer, StringConcat, StringSplit and RegexFullMatch. Case mapping is
//! Unicode's default (locale-independent) mapping, so results do not depend on the machine's
//! locale; `locale` is accepted and ignored. Regular expressions use the `regex` crate, whose
//! syntax is RE2's (what ONNX specifies).

use crate::broadcast::map2;
use crate::registry::Registry;
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, OpError, Result, bail};
use samebits_ir::{DType, Tensor, Value, ValueType};

pub fn register(r: &mut Registry) {
    r.register("", "StringNormalizer", string_normalizer);
    r.register("", "StringConcat", |_| Ok(Box::new(StringConcat)));
    r.register("", "StringSplit", string_split);
    r.register("", "RegexFullMatch", regex_full_match);
}

/// Input `i` as a string tensor and its elements.
fn strings<'a>(inputs: &'a Inputs, i: usize) -> Result<(&'a Tensor, &'a [String])> {
    let t = inputs.tensor(i)?;
    let s = t.as_strings().map_err(|_| {
        OpError::Invalid(format!(
            "input {i} must be a string tensor, got {}",
            t.dtype()
        ))
    })?;
    Ok((t, s))
}

fn same_shape(inputs: &[Option<ValueType>], dtype: DType) -> Vec<Option<ValueType>> {
    let shape = inputs
        .first()
        .cloned()
        .flatten()
        .and_then(|t| t.shape().cloned());
    vec![Some(ValueType::tensor(dtype, shape))]
}

#[derive(Debug, Clone, Copy)]
enum CaseChange {
    None,
    Lower,
    Upper,
}

/// StringNormalizer: drops the elements of a `[C]` or `[1, C]` tensor that are stopwords
/// (compared after lowercasing both unless `is_case_sensitive`), then changes the case of the
/// rest. When every element is dropped the result is one empty string.
#[derive(Debug)]
struct StringNormalizer {
    case_change: CaseChange,
    case_sensitive: bool,
    stopwords: Vec<String>,
}

fn string_normalizer(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    let case_change = match args
        .string_or("case_change_action", "NONE".into())?
        .as_str()
    {
        "NONE" => CaseChange::None,
        "LOWER" => CaseChange::Lower,
        "UPPER" => CaseChange::Upper,
        other => {
            bail!("attribute \"case_change_action\" must be NONE, LOWER or UPPER, got {other:?}")
        }
    };
    let case_sensitive = args.int_or("is_case_sensitive", 0)? != 0;
    let mut stopwords = args.strings_or("stopwords", Vec::new())?;
    if !case_sensitive {
        stopwords = stopwords.iter().map(|w| w.to_lowercase()).collect();
    }
    Ok(Box::new(StringNormalizer {
        case_change,
        case_sensitive,
        stopwords,
    }))
}

impl StringNormalizer {
    fn is_stopword(&self, word: &str) -> bool {
        if self.case_sensitive {
            self.stopwords.iter().any(|w| w == word)
        } else {
            let lower = word.to_lowercase();
            self.stopwords.contains(&lower)
        }
    }
}

impl Op for StringNormalizer {
    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (x, words) = strings(inputs, 0)?;
        let two_dims = match x.shape() {
            [_] => false,
            [1, _] => true,
            other => bail!("input 0 must have shape [C] or [1, C], got {other:?}"),
        };
        let mut kept: Vec<String> = words
            .iter()
            .filter(|w| !self.is_stopword(w))
            .map(|w| match self.case_change {
                CaseChange::None => w.clone(),
                CaseChange::Lower => w.to_lowercase(),
                CaseChange::Upper => w.to_uppercase(),
            })
            .collect();
        if kept.is_empty() {
            kept.push(String::new());
        }
        let shape = if two_dims {
            vec![1, kept.len()]
        } else {
            vec![kept.len()]
        };
        Ok(vec![Tensor::from_strings(shape, kept)?.into()])
    }
}

/// StringConcat: elementwise `x + y` with broadcasting.
#[derive(Debug)]
struct StringConcat;

impl Op for StringConcat {
    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (x, xs) = strings(inputs, 0)?;
        let (y, ys) = strings(inputs, 1)?;
        // Broadcast element indices (Copy), then build the strings they pair up.
        let (ix, iy): (Vec<usize>, Vec<usize>) = ((0..xs.len()).collect(), (0..ys.len()).collect());
        let (shape, pairs) = map2(&ix, x.shape(), &iy, y.shape(), |a, b| (a, b))?;
        let out = pairs
            .into_iter()
            .map(|(a, b)| format!("{}{}", xs[a], ys[b]))
            .collect();
        Ok(vec![Tensor::from_strings(shape, out)?.into()])
    }
}

/// StringSplit: splits each element at `delimiter` (or, when it is absent or empty, at runs of
/// whitespace, ignoring leading and trailing whitespace), at most `maxsplit` times from the
/// left. Output 0 has one more axis, as long as the longest split, padded with empty strings;
/// output 1 holds the number of pieces of each element.
#[derive(Debug)]
struct StringSplit {
    delimiter: Option<String>,
    max_splits: Option<usize>,
}

fn string_split(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let args = NodeArgs::new(ctx.node);
    let delimiter = args.string("delimiter")?.filter(|d| !d.is_empty());
    let max_splits = args.int("maxsplit")?.and_then(|m| usize::try_from(m).ok());
    Ok(Box::new(StringSplit {
        delimiter,
        max_splits,
    }))
}

impl StringSplit {
    fn split<'a>(&self, s: &'a str) -> Vec<&'a str> {
        let limit = self.max_splits.map_or(usize::MAX, |m| m.saturating_add(1));
        if let Some(d) = &self.delimiter {
            return s.splitn(limit, d.as_str()).collect();
        }
        let mut pieces = Vec::new();
        let mut rest = s.trim_start();
        while !rest.is_empty() {
            if pieces.len() + 1 == limit {
                pieces.push(rest);
                break;
            }
            match rest.find(char::is_whitespace) {
                Some(end) => {
                    pieces.push(&rest[..end]);
                    rest = rest[end..].trim_start();
                }
                None => {
                    pieces.push(rest);
                    break;
                }
            }
        }
        pieces
    }
}

impl Op for StringSplit {
    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (x, xs) = strings(inputs, 0)?;
        let pieces: Vec<Vec<&str>> = xs.iter().map(|s| self.split(s)).collect();
        let width = pieces.iter().map(Vec::len).max().unwrap_or(0);
        let counts: Vec<i64> = pieces.iter().map(|p| p.len() as i64).collect();
        let padded: Vec<String> = pieces
            .iter()
            .flat_map(|p| (0..width).map(|k| p.get(k).copied().unwrap_or("").to_string()))
            .collect();
        let mut shape = x.shape().to_vec();
        shape.push(width);
        Ok(vec![
            Tensor::from_strings(shape, padded)?.into(),
            Tensor::from_vec(x.shape().to_vec(), counts)?.into(),
        ])
    }
}

/// RegexFullMatch: whether each element matches `pattern` as a whole.
#[derive(Debug)]
struct RegexFullMatch(regex::Regex);

fn regex_full_match(ctx: &BuildContext) -> Result<Box<dyn Op>> {
    let Some(pattern) = NodeArgs::new(ctx.node).string("pattern")? else {
        bail!("missing attribute \"pattern\"");
    };
    let anchored = regex::Regex::new(&format!(r"\A(?:{pattern})\z"))
        .map_err(|e| OpError::Invalid(format!("attribute \"pattern\" {pattern:?}: {e}")))?;
    Ok(Box::new(RegexFullMatch(anchored)))
}

impl Op for RegexFullMatch {
    fn infer(&self, inputs: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(same_shape(inputs, DType::Bool))
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let (x, xs) = strings(inputs, 0)?;
        let matches = xs.iter().map(|s| self.0.is_match(s)).collect();
        Ok(vec![
            Tensor::from_bools(x.shape().to_vec(), matches)?.into(),
        ])
    }
}
