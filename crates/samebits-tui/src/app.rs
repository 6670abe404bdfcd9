//! The UI's state and what keys and engine reports do to it. Nothing here draws or touches the
//! terminal: [`App::handle_key`] returns an [`Effect`] (quit, or a [`Job`] for the engine) and
//! [`App::apply`] folds in a [`WorkerEvent`], so both are tested without a terminal.

use crate::form::{Field, Form};
use crate::picker::{Picker, PickerOutcome};
use crate::worker::{Job, Progress, RunOutcome, Verdict, WorkerEvent};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::path::{Path, PathBuf};

/// What can hold the focus, in Tab order: the settings, the prompt, the two actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Focus {
    Field(Field),
    Run,
    Verify,
}

pub const FOCUS_ORDER: [Focus; 13] = [
    Focus::Field(Field::Server),
    Focus::Field(Field::Model),
    Focus::Field(Field::Chat),
    Focus::Field(Field::OperationSet),
    Focus::Field(Field::Device),
    Focus::Field(Field::Partitions),
    Focus::Field(Field::MaxTokens),
    Focus::Field(Field::Temperature),
    Focus::Field(Field::TopP),
    Focus::Field(Field::Seed),
    Focus::Field(Field::Prompt),
    Focus::Run,
    Focus::Verify,
];

/// How keys are read.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// Keys move between fields and trigger actions.
    Navigate,
    /// Keys edit the focused text field.
    Edit,
    /// The model file picker is open.
    Picker(Picker),
}

/// What the event loop must do after a key.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    None,
    Quit,
    Submit(Job),
}

/// What the engine is doing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activity {
    Idle,
    /// A job was sent and has not reported yet.
    Starting,
    Loading,
    Prefilling {
        prompt_tokens: usize,
    },
    /// The request is on the run's server, which prefills it.
    Sent,
    Decoding {
        /// `None` on a server, which tells the count only at the end.
        prompt_tokens: Option<usize>,
        progress: Progress,
    },
    Verifying,
}

/// Where a run of the history stands.
#[derive(Clone, Debug, PartialEq)]
pub enum RunState {
    Running,
    Done(RunOutcome),
    Failed(String),
}

/// One run of this session.
#[derive(Clone, Debug, PartialEq)]
pub struct HistoryEntry {
    pub prompt: String,
    /// The server it ran on (`None`: in this process).
    pub server: Option<String>,
    /// The text generated so far (all of it once done).
    pub output: String,
    pub state: RunState,
    /// The last verification of its receipt.
    pub verdict: Option<Verdict>,
}

/// A line for the status bar that is not about the engine's progress.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    Info(String),
    Error(String),
}

pub struct App {
    pub form: Form,
    /// Index into [`FOCUS_ORDER`].
    pub focus: usize,
    pub mode: Mode,
    pub history: Vec<HistoryEntry>,
    /// The history entry the output and receipt panes show.
    pub selected: Option<usize>,
    /// The history entry the engine is working on.
    pub working_on: Option<usize>,
    pub activity: Activity,
    pub message: Option<Message>,
    /// Lines the output pane is scrolled up from its end (0 follows the end).
    pub output_scroll: usize,
    /// Where the picker opens when the Model field names no existing folder.
    pub models_dir: PathBuf,
}

impl App {
    /// Starts with the focus on the Prompt, ready for Enter.
    pub fn new(model: &Path, models_dir: &Path) -> App {
        App {
            form: Form::new(&model.to_string_lossy()),
            focus: focus_index(Focus::Field(Field::Prompt)),
            mode: Mode::Navigate,
            history: Vec::new(),
            selected: None,
            working_on: None,
            activity: Activity::Idle,
            message: None,
            output_scroll: 0,
            models_dir: models_dir.to_path_buf(),
        }
    }

    pub fn focused(&self) -> Focus {
        FOCUS_ORDER[self.focus]
    }

    pub fn is_busy(&self) -> bool {
        self.activity != Activity::Idle
    }

    pub fn handle_key(&mut self, key: KeyEvent) -> Effect {
        if key.kind == KeyEventKind::Release {
            return Effect::None;
        }
        let control = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('c') if control => return Effect::Quit,
            KeyCode::Char('r') if control => return self.start_run(),
            KeyCode::F(5) => return self.start_run(),
            _ => {}
        }
        match &mut self.mode {
            Mode::Picker(picker) => {
                match picker.handle_key(key) {
                    PickerOutcome::Open => {}
                    PickerOutcome::Cancelled => self.mode = Mode::Navigate,
                    PickerOutcome::Chosen(path) => {
                        self.form.model.set(&path.to_string_lossy());
                        self.message = Some(Message::Info(format!("model: {}", path.display())));
                        self.mode = Mode::Navigate;
                    }
                }
                Effect::None
            }
            Mode::Edit => {
                self.edit_key(key);
                Effect::None
            }
            Mode::Navigate => self.navigate_key(key),
        }
    }

    fn edit_key(&mut self, key: KeyEvent) {
        let Focus::Field(field) = self.focused() else {
            self.mode = Mode::Navigate;
            return;
        };
        match key.code {
            KeyCode::Esc => self.mode = Mode::Navigate,
            KeyCode::Tab => {
                self.mode = Mode::Navigate;
                self.move_focus(1);
            }
            KeyCode::BackTab => {
                self.mode = Mode::Navigate;
                self.move_focus(-1);
            }
            _ => {
                let Some(input) = self.form.input_mut(field) else {
                    self.mode = Mode::Navigate;
                    return;
                };
                if !input.handle_key(key) && key.code == KeyCode::Enter {
                    self.mode = Mode::Navigate;
                }
            }
        }
    }

    fn navigate_key(&mut self, key: KeyEvent) -> Effect {
        let focus = self.focused();
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return Effect::Quit,
            KeyCode::Up | KeyCode::BackTab | KeyCode::Char('k') => self.move_focus(-1),
            KeyCode::Down | KeyCode::Tab | KeyCode::Char('j') => self.move_focus(1),
            KeyCode::Enter => match focus {
                Focus::Run => return self.start_run(),
                Focus::Verify => return self.start_verify(),
                Focus::Field(field) => {
                    if self.form.input(field).is_some() {
                        self.mode = Mode::Edit;
                        self.message = None;
                    } else {
                        self.form.step_choice(field, true);
                    }
                }
            },
            KeyCode::Char(' ') | KeyCode::Right | KeyCode::Left => {
                if let Focus::Field(field) = focus {
                    self.form.step_choice(field, key.code != KeyCode::Left);
                }
            }
            KeyCode::Char('o') => self.open_picker(),
            KeyCode::Char('r') => return self.start_run(),
            KeyCode::Char('v') => return self.start_verify(),
            KeyCode::Char('[') => self.select_history(-1),
            KeyCode::Char(']') => self.select_history(1),
            KeyCode::PageUp => self.output_scroll += 5,
            KeyCode::PageDown => self.output_scroll = self.output_scroll.saturating_sub(5),
            _ => {}
        }
        Effect::None
    }

    fn move_focus(&mut self, by: isize) {
        let n = FOCUS_ORDER.len() as isize;
        self.focus = (self.focus as isize + by).rem_euclid(n) as usize;
    }

    fn select_history(&mut self, by: isize) {
        if let Some(at) = self.selected {
            let last = self.history.len() as isize - 1;
            self.selected = Some((at as isize + by).clamp(0, last) as usize);
            self.output_scroll = 0;
        }
    }

    /// Opens the picker on the Model field's folder, or the models folder.
    fn open_picker(&mut self) {
        let typed = PathBuf::from(self.form.model.text().trim());
        let dir = if typed.is_dir() {
            typed
        } else {
            typed
                .parent()
                .filter(|p| p.is_dir())
                .map_or_else(|| self.models_dir.clone(), Path::to_path_buf)
        };
        self.focus = focus_index(Focus::Field(Field::Model));
        self.mode = Mode::Picker(Picker::open(&dir));
    }

    fn start_run(&mut self) -> Effect {
        if self.is_busy() {
            self.message = Some(Message::Error(
                "busy: wait for the current job to finish".into(),
            ));
            return Effect::None;
        }
        self.mode = Mode::Navigate;
        let request = match self.form.request() {
            Ok(request) => request,
            Err(message) => {
                self.message = Some(Message::Error(message));
                return Effect::None;
            }
        };
        self.history.push(HistoryEntry {
            prompt: request.prompt.clone(),
            server: request.server.as_ref().map(ToString::to_string),
            output: String::new(),
            state: RunState::Running,
            verdict: None,
        });
        let at = self.history.len() - 1;
        self.selected = Some(at);
        self.working_on = Some(at);
        self.output_scroll = 0;
        self.activity = Activity::Starting;
        self.message = None;
        Effect::Submit(Job::Generate(request))
    }

    /// Verifies the receipt of the selected run.
    fn start_verify(&mut self) -> Effect {
        if self.is_busy() {
            self.message = Some(Message::Error(
                "busy: wait for the current job to finish".into(),
            ));
            return Effect::None;
        }
        let receipt = self.selected.and_then(|at| match &self.history[at].state {
            RunState::Done(outcome) => Some((at, outcome.receipt.clone())),
            _ => None,
        });
        let Some((at, receipt)) = receipt else {
            self.message = Some(Message::Error(
                "nothing to verify: the selected run has no receipt (run first)".into(),
            ));
            return Effect::None;
        };
        self.history[at].verdict = None;
        self.working_on = Some(at);
        self.activity = Activity::Starting;
        self.message = None;
        Effect::Submit(Job::Verify(receipt))
    }

    /// Folds in what the engine reported. A message on the status line lasts until the engine
    /// reaches its next phase (tokens do not count, so it stays readable while they stream).
    pub fn apply(&mut self, event: WorkerEvent) {
        if !matches!(event, WorkerEvent::Token { .. }) {
            self.message = None;
        }
        let entry = self.working_on.and_then(|at| self.history.get_mut(at));
        match event {
            WorkerEvent::Loading => self.activity = Activity::Loading,
            WorkerEvent::Prefilling { prompt_tokens } => {
                self.activity = Activity::Prefilling { prompt_tokens };
            }
            WorkerEvent::Sent { .. } => self.activity = Activity::Sent,
            WorkerEvent::Token { text, progress } => {
                if let Some(entry) = entry {
                    entry.output.push_str(&text);
                }
                let prompt_tokens = match self.activity {
                    Activity::Prefilling { prompt_tokens } => Some(prompt_tokens),
                    Activity::Decoding { prompt_tokens, .. } => prompt_tokens,
                    _ => None,
                };
                self.activity = Activity::Decoding {
                    prompt_tokens,
                    progress,
                };
            }
            WorkerEvent::Generated(outcome) => {
                if let Some(entry) = entry {
                    entry.output = outcome.text.clone();
                    entry.state = RunState::Done(outcome);
                }
                self.finish();
            }
            WorkerEvent::Verifying => self.activity = Activity::Verifying,
            WorkerEvent::Verified { receipt, verdict } => {
                let verified = self.history.iter_mut().find(
                    |e| matches!(&e.state, RunState::Done(outcome) if outcome.receipt == receipt),
                );
                if let Some(entry) = verified {
                    entry.verdict = Some(verdict);
                }
                self.finish();
            }
            WorkerEvent::Failed(message) => {
                if let Some(entry) = entry
                    && entry.state == RunState::Running
                {
                    entry.state = RunState::Failed(message.clone());
                }
                self.message = Some(Message::Error(message));
                self.finish();
            }
        }
    }

    fn finish(&mut self) {
        self.activity = Activity::Idle;
        self.working_on = None;
    }

    /// The history entry the panes show.
    pub fn shown(&self) -> Option<&HistoryEntry> {
        self.selected.and_then(|at| self.history.get(at))
    }

    /// The status bar: the engine's progress while it works (and the last message after it),
    /// else the last message, else the shown run's speeds. `true` marks an error.
    pub fn status(&self) -> (String, bool) {
        let message = match &self.message {
            Some(Message::Error(text)) => Some((format!("error: {text}"), true)),
            Some(Message::Info(text)) => Some((text.clone(), false)),
            None => None,
        };
        if let Some(progress) = self.progress() {
            return match message {
                Some((text, is_error)) => (format!("{progress} │ {text}"), is_error),
                None => (progress, false),
            };
        }
        if let Some(message) = message {
            return message;
        }
        let shown = self.shown();
        match shown.map(|e| &e.state) {
            Some(RunState::Done(o)) => (
                format!(
                    "done{}: prefill {} tokens {} tok/s · decode {} tokens {} tok/s",
                    on_server(shown.and_then(|e| e.server.as_deref())),
                    o.prompt_tokens,
                    rate(o.prefill_tokens_per_second),
                    o.generated_tokens.saturating_sub(1),
                    rate(o.decode_tokens_per_second)
                ),
                false,
            ),
            _ if self.form.drives_server() => (
                "ready · runs go to the Server: its model, operation set, device and \
                 partitions apply"
                    .into(),
                false,
            ),
            _ => ("ready".into(), false),
        }
    }

    /// What the engine is doing, in words; `None` when it is idle.
    fn progress(&self) -> Option<String> {
        let server = self
            .working_on
            .and_then(|at| self.history.get(at))
            .and_then(|e| e.server.as_deref());
        let text = match self.activity {
            Activity::Idle => return None,
            Activity::Starting => "starting…".to_string(),
            Activity::Loading => "loading the model…".to_string(),
            Activity::Prefilling { prompt_tokens } => {
                format!("prefill: {prompt_tokens} prompt tokens…")
            }
            Activity::Sent => format!(
                "sent to {}: waiting for its first token…",
                server.unwrap_or("the server")
            ),
            Activity::Decoding {
                prompt_tokens,
                progress,
            } => {
                let prefill = match prompt_tokens {
                    Some(n) => format!(
                        "prefill {} tok/s",
                        rate(n as f64 / progress.prefill.as_secs_f64().max(1e-9))
                    ),
                    None => format!("first token {:.2} s", progress.prefill.as_secs_f64()),
                };
                let decode_steps = progress.tokens.saturating_sub(1);
                let decode = decode_steps as f64 / progress.decode.as_secs_f64().max(1e-9);
                format!(
                    "generating{}: {} tokens · {prefill} · decode {} tok/s",
                    on_server(server),
                    progress.tokens,
                    rate(decode)
                )
            }
            Activity::Verifying => "verifying: re-running the receipt…".to_string(),
        };
        Some(text)
    }

    /// The keys that work now.
    pub fn help(&self) -> &'static str {
        match &self.mode {
            Mode::Picker(_) => {
                "↑↓ choose · Enter open/choose · Backspace parent folder · Esc cancel"
            }
            Mode::Edit if self.form.prompt.is_multiline() && self.focused() == PROMPT => {
                "typing · Enter new line · Esc done · Tab next field · Ctrl-R run · Ctrl-C quit"
            }
            Mode::Edit if self.focused() == Focus::Field(Field::Server) => {
                "a samebits serve URL, e.g. http://127.0.0.1:8080; empty: run in-process · Enter/Esc done"
            }
            Mode::Edit => "typing · Enter/Esc done · Ctrl-U clear · Tab next field · Ctrl-R run",
            Mode::Navigate => {
                "↑↓ move · Enter edit/toggle · ←→ change · o model · r run · v verify · [ ] history · q quit"
            }
        }
    }
}

const PROMPT: Focus = Focus::Field(Field::Prompt);

/// ` on URL` for a run on a server, else nothing.
fn on_server(server: Option<&str>) -> String {
    server.map_or_else(String::new, |s| format!(" on {s}"))
}

/// Tokens per second with one decimal, two below 10 (so slow builds do not show 0.0).
fn rate(tokens_per_second: f64) -> String {
    if tokens_per_second < 10.0 {
        format!("{tokens_per_second:.2}")
    } else {
        format!("{tokens_per_second:.1}")
    }
}

pub fn focus_index(focus: Focus) -> usize {
    FOCUS_ORDER
        .iter()
        .position(|&f| f == focus)
        .expect("every focus is in the order")
}

/// What a verdict says, in one line.
pub fn verdict_line(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Match { steps } => {
            format!("MATCH: {steps} tokens, logits bit-identical")
        }
        Verdict::Mismatch {
            steps_matched,
            step,
            message,
        } => match step {
            Some(step) => format!("MISMATCH at step {step} ({steps_matched} matched): {message}"),
            None => format!("MISMATCH ({steps_matched} steps matched): {message}"),
        },
        Verdict::Unusable(message) => format!("cannot verify: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::ExecutionOptions;
    use std::time::Duration;

    pub(crate) fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn ctrl(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    fn type_text(app: &mut App, text: &str) {
        for c in text.chars() {
            let code = if c == '\n' {
                KeyCode::Enter
            } else {
                KeyCode::Char(c)
            };
            assert_eq!(app.handle_key(key(code)), Effect::None);
        }
    }

    /// An app whose model file exists (an empty temporary file: nothing loads it here).
    fn app_with_model() -> (tempfile::NamedTempFile, App) {
        let model = tempfile::NamedTempFile::new().unwrap();
        let app = App::new(model.path(), Path::new("/"));
        (model, app)
    }

    fn outcome(receipt: &str) -> RunOutcome {
        RunOutcome {
            text: " Paris.".into(),
            prompt_tokens: 6,
            generated_tokens: 3,
            prefill_tokens_per_second: 60.0,
            decode_tokens_per_second: 10.0,
            receipt: receipt.into(),
            receipt_sha256: "ab".repeat(32),
            logits_digest: "cd".repeat(32),
        }
    }

    #[test]
    fn q_and_esc_quit_while_navigating_but_type_while_editing() {
        let (_model, mut app) = app_with_model();
        assert_eq!(app.focused(), PROMPT);
        app.handle_key(key(KeyCode::Enter));
        assert_eq!(app.mode, Mode::Edit);
        type_text(&mut app, "quick\nquestion");
        assert_eq!(app.form.prompt.text(), "quick\nquestion");
        assert_eq!(
            app.handle_key(key(KeyCode::Esc)),
            Effect::None,
            "Esc leaves editing"
        );
        assert_eq!(app.mode, Mode::Navigate);
        assert_eq!(app.handle_key(key(KeyCode::Char('q'))), Effect::Quit);
        assert_eq!(app.handle_key(key(KeyCode::Esc)), Effect::Quit);
    }

    #[test]
    fn ctrl_c_quits_from_every_mode() {
        let (_model, mut app) = app_with_model();
        assert_eq!(app.handle_key(ctrl('c')), Effect::Quit);
        app.handle_key(key(KeyCode::Enter));
        assert_eq!(app.handle_key(ctrl('c')), Effect::Quit);
        app.mode = Mode::Picker(Picker::open(Path::new("/")));
        assert_eq!(app.handle_key(ctrl('c')), Effect::Quit);
    }

    #[test]
    fn arrows_move_the_focus_and_change_choices() {
        let (_model, mut app) = app_with_model();
        app.handle_key(key(KeyCode::Down));
        assert_eq!(app.focused(), Focus::Run);
        app.handle_key(key(KeyCode::Tab));
        app.handle_key(key(KeyCode::Tab));
        assert_eq!(app.focused(), Focus::Field(Field::Server), "wraps around");
        app.handle_key(key(KeyCode::Up));
        assert_eq!(app.focused(), Focus::Verify);
        app.focus = focus_index(Focus::Field(Field::Chat));
        app.handle_key(key(KeyCode::Enter));
        assert!(!app.form.chat);
        app.handle_key(key(KeyCode::Char(' ')));
        assert!(app.form.chat);
        app.handle_key(key(KeyCode::Down));
        app.handle_key(key(KeyCode::Left));
        assert_eq!(app.form.operation_set.name(), "deterministic");
        // A single-line field: Enter edits, Enter again is done.
        app.focus = focus_index(Focus::Field(Field::MaxTokens));
        app.handle_key(key(KeyCode::Enter));
        app.handle_key(key(KeyCode::Backspace));
        app.handle_key(key(KeyCode::Backspace));
        type_text(&mut app, "12");
        app.handle_key(key(KeyCode::Enter));
        assert_eq!(app.mode, Mode::Navigate);
        assert_eq!(app.form.max_tokens.text(), "12");
    }

    #[test]
    fn a_bad_option_is_shown_and_nothing_runs() {
        let (_model, mut app) = app_with_model();
        assert_eq!(app.handle_key(key(KeyCode::Char('r'))), Effect::None);
        assert_eq!(
            app.status(),
            (
                "error: Prompt: empty (select Prompt and press Enter to write one)".into(),
                true
            )
        );
        app.form.prompt.set("Hi");
        app.form.top_p.set("2");
        assert_eq!(app.handle_key(key(KeyCode::F(5))), Effect::None);
        assert_eq!(
            app.status().0,
            "error: Top-p: expected a number in (0, 1], got \"2\""
        );
        app.form.model.set("/missing.gguf");
        app.handle_key(ctrl('r'));
        assert_eq!(app.status().0, "error: Model: no file at /missing.gguf");
        assert!(app.history.is_empty());
        assert!(!app.is_busy());
    }

    #[test]
    fn a_run_streams_then_records_its_receipt_and_verification() {
        let (model, mut app) = app_with_model();
        app.form.prompt.set("The capital of France is");
        let Effect::Submit(Job::Generate(request)) = app.handle_key(key(KeyCode::Char('r'))) else {
            panic!("expected a generation job")
        };
        assert_eq!(request.model, model.path());
        assert_eq!(request.execution, ExecutionOptions::default());
        assert!(app.is_busy());
        assert!(
            app.handle_key(key(KeyCode::Char('r'))) == Effect::None,
            "one job at a time"
        );
        assert_eq!(
            app.status(),
            (
                "starting… │ error: busy: wait for the current job to finish".into(),
                true
            )
        );
        app.apply(WorkerEvent::Loading);
        app.apply(WorkerEvent::Prefilling { prompt_tokens: 6 });
        assert_eq!(app.status().0, "prefill: 6 prompt tokens…");
        let progress = |tokens, decode_ms| Progress {
            prefill: Duration::from_millis(100),
            tokens,
            decode: Duration::from_millis(decode_ms),
        };
        app.apply(WorkerEvent::Token {
            text: " Par".into(),
            progress: progress(1, 0),
        });
        app.apply(WorkerEvent::Token {
            text: "is".into(),
            progress: progress(2, 100),
        });
        assert_eq!(app.shown().unwrap().output, " Paris");
        assert_eq!(
            app.status().0,
            "generating: 2 tokens · prefill 60.0 tok/s · decode 10.0 tok/s"
        );
        app.apply(WorkerEvent::Generated(outcome("/r/generation-1.json")));
        assert!(!app.is_busy());
        assert_eq!(app.shown().unwrap().output, " Paris.");
        assert_eq!(
            app.status().0,
            "done: prefill 6 tokens 60.0 tok/s · decode 2 tokens 10.0 tok/s"
        );
        let verify = app.handle_key(key(KeyCode::Char('v')));
        assert_eq!(
            verify,
            Effect::Submit(Job::Verify("/r/generation-1.json".into()))
        );
        app.apply(WorkerEvent::Verifying);
        app.apply(WorkerEvent::Verified {
            receipt: "/r/generation-1.json".into(),
            verdict: Verdict::Match { steps: 3 },
        });
        let verdict = app.shown().unwrap().verdict.as_ref().unwrap();
        assert_eq!(
            verdict_line(verdict),
            "MATCH: 3 tokens, logits bit-identical"
        );
    }

    #[test]
    fn failures_mark_the_run_and_history_keys_select_runs() {
        let (_model, mut app) = app_with_model();
        app.form.prompt.set("one");
        app.handle_key(key(KeyCode::Char('r')));
        app.apply(WorkerEvent::Generated(outcome("/r/1.json")));
        app.form.prompt.set("two");
        app.handle_key(key(KeyCode::Char('r')));
        app.apply(WorkerEvent::Failed(
            "Device cuda:0: no CUDA device found".into(),
        ));
        assert_eq!(
            app.history[1].state,
            RunState::Failed("Device cuda:0: no CUDA device found".into())
        );
        assert_eq!(
            app.status(),
            ("error: Device cuda:0: no CUDA device found".into(), true)
        );
        assert!(app.handle_key(key(KeyCode::Char('v'))) == Effect::None);
        assert!(app.status().0.starts_with("error: nothing to verify"));
        app.handle_key(key(KeyCode::Char('[')));
        assert_eq!(app.shown().unwrap().prompt, "one");
        assert_eq!(
            app.handle_key(key(KeyCode::Char('v'))),
            Effect::Submit(Job::Verify("/r/1.json".into()))
        );
        app.apply(WorkerEvent::Verified {
            receipt: "/r/1.json".into(),
            verdict: Verdict::Unusable("/r/1.json: cannot read".into()),
        });
        app.handle_key(key(KeyCode::Char(']')));
        app.handle_key(key(KeyCode::Char(']')));
        assert_eq!(app.selected, Some(1), "stays on the last run");
        assert!(app.history[0].verdict.is_some());
    }

    #[test]
    fn a_run_on_a_server_says_so_while_it_streams() {
        let mut app = App::new(Path::new(""), Path::new("/"));
        app.form.prompt.set("Hi");
        app.form.server.set("http://127.0.0.1:8080");
        assert_eq!(
            app.status().0,
            "ready · runs go to the Server: its model, operation set, device and partitions apply"
        );
        let Effect::Submit(Job::Generate(request)) = app.handle_key(key(KeyCode::Char('r'))) else {
            panic!("no model file is needed with a server")
        };
        assert_eq!(
            request.server.map(|s| s.to_string()),
            Some("http://127.0.0.1:8080".into())
        );
        assert_eq!(
            app.history[0].server.as_deref(),
            Some("http://127.0.0.1:8080")
        );
        app.apply(WorkerEvent::Sent {
            server: "http://127.0.0.1:8080".into(),
        });
        assert_eq!(
            app.status().0,
            "sent to http://127.0.0.1:8080: waiting for its first token…"
        );
        let progress = |tokens, decode_ms| Progress {
            prefill: Duration::from_millis(250),
            tokens,
            decode: Duration::from_millis(decode_ms),
        };
        app.apply(WorkerEvent::Token {
            text: " Paris".into(),
            progress: progress(1, 0),
        });
        app.apply(WorkerEvent::Token {
            text: ".".into(),
            progress: progress(3, 200),
        });
        assert_eq!(
            app.status().0,
            "generating on http://127.0.0.1:8080: 3 tokens · first token 0.25 s · decode 10.0 tok/s"
        );
        app.apply(WorkerEvent::Generated(outcome("/r/generation-1.json")));
        assert_eq!(
            app.status().0,
            "done on http://127.0.0.1:8080: prefill 6 tokens 60.0 tok/s · decode 2 tokens 10.0 tok/s"
        );
        app.handle_key(key(KeyCode::Char('[')));
        assert_eq!(
            app.handle_key(key(KeyCode::Char('v'))),
            Effect::Submit(Job::Verify("/r/generation-1.json".into())),
            "a server's receipt is verified here like any other"
        );
    }

    #[test]
    fn the_picker_sets_the_model() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("m.gguf");
        std::fs::write(&model, b"").unwrap();
        let mut app = App::new(Path::new(""), dir.path());
        app.handle_key(key(KeyCode::Char('o')));
        assert!(matches!(&app.mode, Mode::Picker(p) if p.dir == dir.path()));
        assert_eq!(app.focused(), Focus::Field(Field::Model));
        app.handle_key(key(KeyCode::Enter));
        assert_eq!(app.mode, Mode::Navigate);
        assert_eq!(app.form.model.text(), model.to_str().unwrap());
        assert_eq!(app.status().0, format!("model: {}", model.display()));
    }
}
