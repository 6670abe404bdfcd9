//! The run settings the user fills in: one [`Field`] per setting, their values in [`Form`], and
//! [`Form::request`], which checks them all and turns them into a [`RunRequest`] (or one line
//! naming the field that is wrong).
//!
//! The Server field (empty: run in this process) sends runs to a running `samebits serve`
//! ([`crate::remote`]); then the server's own model, operation set, device and partitions apply,
//! [`Form::applies`] says the Operation set, Device and Partitions fields do not, and the Model
//! field is only the local copy Verify may re-run with.

use crate::execution::ExecutionOptions;
use crate::http::ServerUrl;
use crate::text::TextInput;
use samebits_llm::{GenerateOptions, SamplingOptions};
use samebits_ops::OperationSet;
use std::path::PathBuf;

/// A setting, in screen order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Server,
    Model,
    Chat,
    OperationSet,
    Device,
    Partitions,
    MaxTokens,
    Temperature,
    TopP,
    Seed,
    Prompt,
}

impl Field {
    /// The settings block's rows, top to bottom (the Prompt has its own block below).
    pub const SETTINGS: [Field; 10] = [
        Field::Server,
        Field::Model,
        Field::Chat,
        Field::OperationSet,
        Field::Device,
        Field::Partitions,
        Field::MaxTokens,
        Field::Temperature,
        Field::TopP,
        Field::Seed,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Field::Server => "Server",
            Field::Model => "Model",
            Field::Chat => "Chat template",
            Field::OperationSet => "Operation set",
            Field::Device => "Device",
            Field::Partitions => "Partitions",
            Field::MaxTokens => "Max tokens",
            Field::Temperature => "Temperature",
            Field::TopP => "Top-p",
            Field::Seed => "Seed",
            Field::Prompt => "Prompt",
        }
    }
}

/// The operation sets in the order the field cycles through them.
const OPERATION_SETS: [OperationSet; 4] = OperationSet::ALL;

/// Everything one generation needs, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRequest {
    /// Where to run: `None` in this process, else on this `samebits serve`.
    pub server: Option<ServerUrl>,
    /// In this process: the model. On a server: the local copy Verify re-runs with when the
    /// server's model path is not on this machine (may be empty).
    pub model: PathBuf,
    pub prompt: String,
    pub operation_set: OperationSet,
    pub execution: ExecutionOptions,
    pub generate: GenerateOptions,
}

/// The values of all fields. Text fields keep what was typed until a run checks it.
#[derive(Clone, Debug, PartialEq)]
pub struct Form {
    /// Empty: in-process.
    pub server: TextInput,
    pub model: TextInput,
    pub prompt: TextInput,
    pub chat: bool,
    pub operation_set: OperationSet,
    pub device: TextInput,
    pub partitions: TextInput,
    pub max_tokens: TextInput,
    pub temperature: TextInput,
    pub top_p: TextInput,
    pub seed: TextInput,
}

impl Form {
    /// Defaults: in-process, chat template on, reproducible, cpu, 1 partition, 64 tokens,
    /// greedy.
    pub fn new(model: &str) -> Form {
        let line = |text: &str| TextInput::new(text, false);
        Form {
            server: line(""),
            model: line(model),
            prompt: TextInput::new("", true),
            chat: true,
            operation_set: OperationSet::Reproducible,
            device: line("cpu"),
            partitions: line("1"),
            max_tokens: line("64"),
            temperature: line("0"),
            top_p: line("1"),
            seed: line("0"),
        }
    }

    /// The text being edited for `field`; `None` for the toggle and the choice.
    pub fn input_mut(&mut self, field: Field) -> Option<&mut TextInput> {
        match field {
            Field::Server => Some(&mut self.server),
            Field::Model => Some(&mut self.model),
            Field::Prompt => Some(&mut self.prompt),
            Field::Device => Some(&mut self.device),
            Field::Partitions => Some(&mut self.partitions),
            Field::MaxTokens => Some(&mut self.max_tokens),
            Field::Temperature => Some(&mut self.temperature),
            Field::TopP => Some(&mut self.top_p),
            Field::Seed => Some(&mut self.seed),
            Field::Chat | Field::OperationSet => None,
        }
    }

    pub fn input(&self, field: Field) -> Option<&TextInput> {
        match field {
            Field::Server => Some(&self.server),
            Field::Model => Some(&self.model),
            Field::Prompt => Some(&self.prompt),
            Field::Device => Some(&self.device),
            Field::Partitions => Some(&self.partitions),
            Field::MaxTokens => Some(&self.max_tokens),
            Field::Temperature => Some(&self.temperature),
            Field::TopP => Some(&self.top_p),
            Field::Seed => Some(&self.seed),
            Field::Chat | Field::OperationSet => None,
        }
    }

    /// What the field shows when it is not being edited.
    pub fn display(&self, field: Field) -> String {
        match field {
            Field::Chat => if self.chat { "on" } else { "off" }.to_string(),
            Field::OperationSet => self.operation_set.name().to_string(),
            Field::Server if self.server.text().trim().is_empty() => "none: in-process".into(),
            _ => self
                .input(field)
                .map_or_else(String::new, |i| i.text().to_string()),
        }
    }

    /// Flips the chat toggle or steps the operation set forward (`forward`) or back; other
    /// fields are unchanged. Returns whether the field was one of the two.
    pub fn step_choice(&mut self, field: Field, forward: bool) -> bool {
        match field {
            Field::Chat => self.chat = !self.chat,
            Field::OperationSet => {
                let at = OPERATION_SETS
                    .iter()
                    .position(|&s| s == self.operation_set)
                    .unwrap_or(0);
                let n = OPERATION_SETS.len();
                let next = (if forward { at + 1 } else { at + n - 1 }) % n;
                self.operation_set = OPERATION_SETS[next];
            }
            _ => return false,
        }
        true
    }

    /// True when a Server is set: runs go there.
    pub fn drives_server(&self) -> bool {
        !self.server.text().trim().is_empty()
    }

    /// Whether `field` applies to the next run: with a Server set, the server's own operation
    /// set, device and partitions do, not these fields (the UI greys them out).
    pub fn applies(&self, field: Field) -> bool {
        !(self.drives_server()
            && matches!(
                field,
                Field::OperationSet | Field::Device | Field::Partitions
            ))
    }

    /// Checks every field that applies; the error names the first field that is wrong.
    pub fn request(&self) -> Result<RunRequest, String> {
        let server = match self.server.text().trim() {
            "" => None,
            url => Some(ServerUrl::parse(url).map_err(|e| format!("Server: {e}"))?),
        };
        let model = PathBuf::from(self.model.text().trim());
        if server.is_none() {
            if model.as_os_str().is_empty() {
                return Err(
                    "Model: no model chosen (Enter to type a path, o to pick a file)".into(),
                );
            }
            if !model.is_file() {
                return Err(format!("Model: no file at {}", model.display()));
            }
        }
        let prompt = self.prompt.text().to_string();
        if prompt.trim().is_empty() {
            return Err("Prompt: empty (select Prompt and press Enter to write one)".into());
        }
        let execution = match server {
            None => ExecutionOptions::parse(self.device.text(), self.partitions.text())?,
            // Not used: the server's own.
            Some(_) => ExecutionOptions::default(),
        };
        let max_tokens = match self.max_tokens.text().trim().parse::<usize>() {
            Ok(n) if n >= 1 => n,
            _ => {
                return Err(bad(
                    Field::MaxTokens,
                    "a whole number >= 1",
                    &self.max_tokens,
                ));
            }
        };
        let temperature = match self.temperature.text().trim().parse::<f32>() {
            Ok(t) if t.is_finite() && t >= 0.0 => t,
            _ => return Err(bad(Field::Temperature, "a number >= 0", &self.temperature)),
        };
        let top_p = match self.top_p.text().trim().parse::<f32>() {
            Ok(p) if p > 0.0 && p <= 1.0 => p,
            _ => return Err(bad(Field::TopP, "a number in (0, 1]", &self.top_p)),
        };
        let Ok(seed) = self.seed.text().trim().parse::<u64>() else {
            return Err(bad(Field::Seed, "a whole number >= 0", &self.seed));
        };
        Ok(RunRequest {
            server,
            model,
            prompt,
            operation_set: self.operation_set,
            execution,
            generate: GenerateOptions {
                chat: self.chat,
                max_tokens,
                sampling: SamplingOptions {
                    temperature,
                    top_k: 0,
                    top_p,
                    seed,
                },
            },
        })
    }
}

fn bad(field: Field, expected: &str, input: &TextInput) -> String {
    format!(
        "{}: expected {expected}, got {:?}",
        field.label(),
        input.text()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid_form() -> (tempfile::NamedTempFile, Form) {
        let model = tempfile::NamedTempFile::new().unwrap();
        let mut form = Form::new(model.path().to_str().unwrap());
        form.prompt.set("Hello");
        (model, form)
    }

    #[test]
    fn defaults_give_a_greedy_reproducible_cpu_request() {
        let (model, form) = valid_form();
        let request = form.request().unwrap();
        assert_eq!(request.server, None);
        assert_eq!(request.model, model.path());
        assert_eq!(request.prompt, "Hello");
        assert_eq!(request.operation_set, OperationSet::Reproducible);
        assert_eq!(request.execution, ExecutionOptions::default());
        assert!(request.generate.chat);
        assert_eq!(request.generate.max_tokens, 64);
        assert_eq!(request.generate.sampling, SamplingOptions::default());
    }

    #[test]
    fn each_bad_value_is_named_by_its_field() {
        let cases: [(Field, &str, &str); 7] = [
            (
                Field::MaxTokens,
                "0",
                "Max tokens: expected a whole number >= 1, got \"0\"",
            ),
            (
                Field::Temperature,
                "-1",
                "Temperature: expected a number >= 0, got \"-1\"",
            ),
            (
                Field::Temperature,
                "inf",
                "Temperature: expected a number >= 0, got \"inf\"",
            ),
            (
                Field::TopP,
                "0",
                "Top-p: expected a number in (0, 1], got \"0\"",
            ),
            (
                Field::Seed,
                "x",
                "Seed: expected a whole number >= 0, got \"x\"",
            ),
            (
                Field::Device,
                "tpu",
                "Device: expected cpu, cuda or cuda:N, got \"tpu\"",
            ),
            (
                Field::Partitions,
                "0",
                "Partitions: expected a whole number >= 1, got \"0\"",
            ),
        ];
        for (field, value, message) in cases {
            let (_model, mut form) = valid_form();
            form.input_mut(field).unwrap().set(value);
            assert_eq!(form.request().unwrap_err(), message);
        }
    }

    #[test]
    fn a_missing_model_or_an_empty_prompt_is_an_error() {
        let (_model, mut form) = valid_form();
        form.model.set("/no/such/model.gguf");
        assert_eq!(
            form.request().unwrap_err(),
            "Model: no file at /no/such/model.gguf"
        );
        form.model.set("  ");
        assert!(
            form.request()
                .unwrap_err()
                .starts_with("Model: no model chosen")
        );
        let (_model, mut form) = valid_form();
        form.prompt.set(" \n");
        assert!(form.request().unwrap_err().starts_with("Prompt: empty"));
    }

    #[test]
    fn a_server_replaces_the_model_device_and_partitions() {
        let mut form = Form::new("/no/such/model.gguf");
        form.prompt.set("Hello");
        assert_eq!(form.display(Field::Server), "none: in-process");
        assert!(form.applies(Field::Device));
        form.server.set(" http://127.0.0.1:8080 ");
        form.device.set("tpu");
        form.partitions.set("0");
        let request = form.request().unwrap();
        assert_eq!(
            request.server.map(|s| s.to_string()),
            Some("http://127.0.0.1:8080".into())
        );
        assert_eq!(request.model, PathBuf::from("/no/such/model.gguf"));
        assert_eq!(request.execution, ExecutionOptions::default());
        for field in [Field::OperationSet, Field::Device, Field::Partitions] {
            assert!(!form.applies(field), "{field:?}");
        }
        for field in [Field::Server, Field::Model, Field::Chat, Field::Seed] {
            assert!(form.applies(field), "{field:?}");
        }
        form.model.set("");
        assert!(form.request().is_ok(), "the server names its model");
        form.server.set("https://example.org");
        let error = form.request().unwrap_err();
        assert!(
            error.starts_with("Server: https://example.org: https is not supported"),
            "{error}"
        );
    }

    #[test]
    fn choices_cycle_both_ways() {
        let mut form = Form::new("");
        assert!(form.step_choice(Field::OperationSet, true));
        assert_eq!(form.operation_set, OperationSet::ReproducibleInt8);
        form.step_choice(Field::OperationSet, true);
        assert_eq!(form.operation_set, OperationSet::Default);
        form.step_choice(Field::OperationSet, false);
        form.step_choice(Field::OperationSet, false);
        assert_eq!(form.operation_set, OperationSet::Reproducible);
        form.step_choice(Field::Chat, true);
        assert_eq!(form.display(Field::Chat), "off");
        assert!(!form.step_choice(Field::Seed, true));
    }
}
