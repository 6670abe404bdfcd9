//! TfIdfVectorizer (opset 9): counts the n-grams of a pool in each row of int32 / int64 /
//! string tokens, with skips, and writes term frequencies, IDF weights or their products.
//!
//! Implements contract section `tfidf`: counting is exact integer arithmetic; the only rounded
//! operations are the conversion of a count to f32 and, in TFIDF mode, one f32 product
//! `count * weight`, so the result is the same everywhere.

use crate::registry::Registry;
use crate::{BuildContext, Inputs, InputsExt, NodeArgs, Op, Result, bail, unsupported};
use samebits_ir::limits::check_tensor_size;
use samebits_ir::{DType, Tensor, Value, ValueType};
use std::collections::HashMap;

pub fn register(r: &mut Registry) {
    r.register("", "TfIdfVectorizer", TfIdf::build);
}

/// A token as the pool compares it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Token {
    Int(i64),
    Text(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Tf,
    Idf,
    TfIdf,
}

#[derive(Debug)]
struct TfIdf {
    min_gram: usize,
    max_gram: usize,
    max_skip: usize,
    mode: Mode,
    /// Pool n-gram → its ordinal in the pool.
    pool: HashMap<Vec<Token>, usize>,
    /// Per pool n-gram: output column and weight.
    columns: Vec<usize>,
    weights: Vec<f32>,
    width: usize,
    strings: bool,
}

impl TfIdf {
    fn build(ctx: &BuildContext) -> Result<Box<dyn Op>> {
        let args = NodeArgs::new(ctx.node);
        let positive = |name: &str| -> Result<usize> {
            match args.int(name)? {
                Some(v) if v >= 1 => Ok(v as usize),
                other => bail!("TfIdfVectorizer: attribute \"{name}\" must be >= 1, got {other:?}"),
            }
        };
        let (min_gram, max_gram) = (positive("min_gram_length")?, positive("max_gram_length")?);
        if min_gram > max_gram {
            bail!("TfIdfVectorizer: min_gram_length {min_gram} > max_gram_length {max_gram}");
        }
        let max_skip = match args.int_or("max_skip_count", 0)? {
            s if s >= 0 => s as usize,
            s => bail!("TfIdfVectorizer: attribute \"max_skip_count\" must be >= 0, got {s}"),
        };
        let mode = match args.string("mode")?.as_deref() {
            Some("TF") => Mode::Tf,
            Some("IDF") => Mode::Idf,
            Some("TFIDF") => Mode::TfIdf,
            other => {
                bail!("TfIdfVectorizer: attribute \"mode\" must be TF, IDF or TFIDF, got {other:?}")
            }
        };
        let (tokens, strings): (Vec<Token>, bool) =
            match (args.ints("pool_int64s")?, args.strings("pool_strings")?) {
                (Some(p), None) => (p.into_iter().map(Token::Int).collect(), false),
                (None, Some(p)) => (p.into_iter().map(Token::Text).collect(), true),
                _ => bail!(
                    "TfIdfVectorizer: exactly one of the attributes pool_int64s and pool_strings \
                     must be set"
                ),
            };
        let starts = args.ints("ngram_counts")?.unwrap_or_default();
        let columns = args.ints("ngram_indexes")?.unwrap_or_default();
        // Level j (n-grams of length j + 1) is pool[starts[j] .. starts[j + 1]] (or the end).
        let mut grams: Vec<Vec<Token>> = Vec::new();
        for (j, &start) in starts.iter().enumerate() {
            let end = starts.get(j + 1).copied().unwrap_or(tokens.len() as i64);
            if start < 0 || end < start || end as usize > tokens.len() {
                bail!(
                    "TfIdfVectorizer: attribute \"ngram_counts\" {starts:?} is not a list of \
                     increasing offsets into a pool of {} tokens",
                    tokens.len()
                );
            }
            let level = &tokens[start as usize..end as usize];
            if level.len() % (j + 1) != 0 {
                bail!(
                    "TfIdfVectorizer: level {} of the pool holds {} tokens, not a multiple of {}",
                    j + 1,
                    level.len(),
                    j + 1
                );
            }
            grams.extend(level.chunks(j + 1).map(<[Token]>::to_vec));
        }
        if columns.len() != grams.len() || columns.iter().any(|&c| c < 0) {
            bail!(
                "TfIdfVectorizer: attribute \"ngram_indexes\" must hold one non-negative index \
                 per pool n-gram ({}), got {columns:?}",
                grams.len()
            );
        }
        let weights = match args.floats("weights")? {
            None => vec![1.0; grams.len()],
            Some(w) if w.len() == grams.len() => w,
            Some(w) => bail!(
                "TfIdfVectorizer: attribute \"weights\" has {} values for {} pool n-grams",
                w.len(),
                grams.len()
            ),
        };
        let width = columns.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
        let mut pool = HashMap::new();
        for (i, gram) in grams.into_iter().enumerate() {
            pool.entry(gram).or_insert(i);
        }
        Ok(Box::new(TfIdf {
            min_gram,
            max_gram,
            max_skip,
            mode,
            pool,
            columns: columns.into_iter().map(|c| c as usize).collect(),
            weights,
            width,
            strings,
        }))
    }

    /// The pool counts of one row: for each skip `s` in `0 ..= max_skip_count` and each start
    /// position, the n-grams `row[i], row[i + s + 1], ...` of each length in
    /// `min_gram_length ..= max_gram_length` (unigrams once, at skip 0).
    fn count(&self, row: &[Token], counts: &mut [u64]) {
        counts.fill(0);
        let mut gram = Vec::with_capacity(self.max_gram);
        for skip in 0..=self.max_skip {
            let step = skip + 1;
            for start in 0..row.len() {
                gram.clear();
                for n in 1..=self.max_gram {
                    let Some(token) = row.get(start + (n - 1) * step) else {
                        break;
                    };
                    gram.push(token.clone());
                    if n < self.min_gram || (n == 1 && skip > 0) {
                        continue;
                    }
                    if let Some(&i) = self.pool.get(&gram) {
                        counts[i] += 1;
                    }
                }
            }
        }
    }
}

impl Op for TfIdf {
    fn infer(&self, _: &[Option<ValueType>]) -> Result<Vec<Option<ValueType>>> {
        Ok(vec![Some(ValueType::tensor(DType::F32, None))])
    }

    fn eval(&self, inputs: &Inputs) -> Result<Vec<Value>> {
        let x = inputs.tensor(0)?;
        let tokens: Vec<Token> = match (x.dtype(), self.strings) {
            (DType::String, true) => x.as_strings()?.iter().cloned().map(Token::Text).collect(),
            (DType::I32 | DType::I64, false) => {
                x.to_i64_vec()?.into_iter().map(Token::Int).collect()
            }
            (dtype, _) => unsupported!(
                "TfIdfVectorizer input of dtype {dtype} with a pool of {}",
                if self.strings { "strings" } else { "integers" }
            ),
        };
        let (rows, len, shape) = match x.shape() {
            [c] => (1, *c, vec![self.width]),
            [n, c] => (*n, *c, vec![*n, self.width]),
            other => bail!("TfIdfVectorizer: input 0 must be [C] or [N, C], got shape {other:?}"),
        };
        check_tensor_size("TfIdfVectorizer output", &shape, DType::F32)?;
        let mut out = vec![0.0f32; rows * self.width];
        let mut counts = vec![0u64; self.columns.len()];
        for (r, dst) in out.chunks_mut(self.width.max(1)).enumerate().take(rows) {
            self.count(&tokens[r * len..][..len], &mut counts);
            // Pool n-grams in pool order; a column shared by several adds their values.
            for ((&count, &column), &weight) in counts.iter().zip(&self.columns).zip(&self.weights)
            {
                let value = match self.mode {
                    Mode::Tf => count as f32,
                    Mode::Idf if count > 0 => weight,
                    Mode::Idf => 0.0,
                    Mode::TfIdf => count as f32 * weight,
                };
                dst[column] += value;
            }
        }
        Ok(vec![Tensor::from_vec(shape, out)?.into()])
    }
}
