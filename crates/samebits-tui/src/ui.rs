//! Drawing [`App`] into a ratatui frame; reads the state, changes nothing.
//!
//! ```text
//! ┌ samebits · settings ─────────┐┌ Output · run #1 ────────────────────────┐
//! │ Server         none: in-pro… ││ › the prompt                            │
//! │ Model          …Q4_1.gguf    ││ the streamed answer…                    │
//! │ ... one row per setting      ││                                         │
//! └──────────────────────────────┘│                                         │
//! ┌ Prompt ──────────────────────┐│                                         │
//! └──────────────────────────────┘└─────────────────────────────────────────┘
//!  [ Run ]  [ Verify ]            ┌ Receipt ────────────────────────────────┐
//! ┌ History ─────────────────────┐│ file / sha256 / logits digest / verify  │
//! └──────────────────────────────┘└─────────────────────────────────────────┘
//! status line: progress, speeds or the last error
//! help line: the keys that work now
//! ```
//!
//! With a Server set, the Operation set, Device and Partitions rows read "set by the server" in
//! grey (the server's own apply), and the status line says so while idle.

use crate::app::{App, Focus, HistoryEntry, Mode, RunState, verdict_line};
use crate::form::Field;
use crate::picker::Picker;
use crate::text::{head, tail, window, wrap};
use crate::worker::Verdict;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

/// Width of the left column (settings, prompt, actions, history).
const LEFT_WIDTH: u16 = 44;
/// Width of the settings' label column.
const LABEL_WIDTH: usize = 15;
/// What a setting that the Server overrides shows.
const SET_BY_SERVER: &str = "set by the server";

pub fn draw(frame: &mut Frame, app: &App) {
    let [main, status, help] = Layout::vertical([
        Constraint::Min(0),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let [left, right] =
        Layout::horizontal([Constraint::Length(LEFT_WIDTH), Constraint::Min(0)]).areas(main);
    let [settings, prompt, actions, history] = Layout::vertical([
        Constraint::Length(Field::SETTINGS.len() as u16 + 2),
        Constraint::Length(6),
        Constraint::Length(1),
        Constraint::Min(0),
    ])
    .areas(left);
    let [output, receipt] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(6)]).areas(right);

    draw_settings(frame, app, settings);
    draw_prompt(frame, app, prompt);
    draw_actions(frame, app, actions);
    draw_history(frame, app, history);
    draw_output(frame, app, output);
    draw_receipt(frame, app, receipt);
    let (text, is_error) = app.status();
    let style = if is_error {
        Style::new().fg(Color::Red).add_modifier(Modifier::BOLD)
    } else {
        Style::new().fg(Color::Cyan)
    };
    frame.render_widget(Paragraph::new(Span::styled(text, style)), status);
    frame.render_widget(
        Paragraph::new(Span::styled(app.help(), Style::new().fg(Color::DarkGray))),
        help,
    );
    if let Mode::Picker(picker) = &app.mode {
        draw_picker(frame, picker, right);
    }
}

fn focused_block(title: String, focused: bool) -> Block<'static> {
    let style = if focused {
        Style::new().fg(Color::Yellow)
    } else {
        Style::new()
    };
    Block::bordered().title(title).border_style(style)
}

fn label_style(focused: bool) -> Style {
    if focused {
        Style::new()
            .fg(Color::Black)
            .bg(Color::Yellow)
            .add_modifier(Modifier::BOLD)
    } else {
        Style::new().add_modifier(Modifier::BOLD)
    }
}

fn draw_settings(frame: &mut Frame, app: &App, area: Rect) {
    let in_settings = matches!(app.focused(), Focus::Field(f) if f != Field::Prompt);
    let block = focused_block(" samebits · settings ".into(), in_settings);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let value_width = (inner.width as usize).saturating_sub(LABEL_WIDTH);
    for (row, &field) in Field::SETTINGS.iter().enumerate() {
        if row as u16 >= inner.height {
            break;
        }
        let focused = app.focused() == Focus::Field(field);
        let editing = focused && app.mode == Mode::Edit;
        let value = match app.form.input(field) {
            Some(input) if editing => {
                let (shown, column) = window(input.text(), input.cursor(), value_width);
                let x = inner.x + (LABEL_WIDTH + column) as u16;
                frame.set_cursor_position(Position::new(x, inner.y + row as u16));
                shown
            }
            _ if !app.form.applies(field) => tail(SET_BY_SERVER, value_width),
            _ => tail(&app.form.display(field), value_width),
        };
        let value_style = if editing {
            Style::new().fg(Color::Yellow)
        } else if !app.form.applies(field) || (field == Field::Server && !app.form.drives_server())
        {
            Style::new().fg(Color::DarkGray)
        } else {
            Style::new()
        };
        let line = Line::from(vec![
            Span::styled(
                format!("{:<LABEL_WIDTH$}", field.label()),
                label_style(focused),
            ),
            Span::styled(value, value_style),
        ]);
        let row_area = Rect::new(inner.x, inner.y + row as u16, inner.width, 1);
        frame.render_widget(Paragraph::new(line), row_area);
    }
}

fn draw_prompt(frame: &mut Frame, app: &App, area: Rect) {
    let focused = app.focused() == Focus::Field(Field::Prompt);
    let editing = focused && app.mode == Mode::Edit;
    let title = if editing {
        " Prompt · editing (Esc done) ".to_string()
    } else {
        " Prompt ".to_string()
    };
    let block = focused_block(title, focused);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let input = &app.form.prompt;
    if input.text().is_empty() && !editing {
        let hint = Span::styled(
            "Enter here to write a prompt",
            Style::new().fg(Color::DarkGray),
        );
        frame.render_widget(Paragraph::new(hint), inner);
        return;
    }
    let cursor = editing.then_some(input.cursor());
    let wrapped = wrap(input.text(), inner.width as usize, cursor);
    let height = inner.height as usize;
    let cursor_row = wrapped.cursor.map_or(0, |(row, _)| row);
    let first = (cursor_row + 1).saturating_sub(height);
    let lines: Vec<Line> = wrapped
        .lines
        .into_iter()
        .skip(first)
        .take(height)
        .map(Line::from)
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
    if let Some((row, column)) = wrapped.cursor
        && inner.width > 0
        && height > 0
    {
        let position = Position::new(inner.x + column as u16, inner.y + (row - first) as u16);
        frame.set_cursor_position(position);
    }
}

fn draw_actions(frame: &mut Frame, app: &App, area: Rect) {
    let button = |label: &str, focus: Focus| {
        Span::styled(format!("[ {label} ]"), label_style(app.focused() == focus))
    };
    let run_label = if app.is_busy() { "Running…" } else { "Run" };
    let line = Line::from(vec![
        Span::raw(" "),
        button(run_label, Focus::Run),
        Span::raw("  "),
        button("Verify", Focus::Verify),
    ]);
    frame.render_widget(Paragraph::new(line), area);
}

/// A run's mark in the history: running, failed, verified, differing, or not yet verified.
fn history_mark(entry: &HistoryEntry) -> &'static str {
    match (&entry.state, &entry.verdict) {
        (RunState::Running, _) => "…",
        (RunState::Failed(_), _) => "!",
        (_, Some(Verdict::Match { .. })) => "✓",
        (_, Some(_)) => "✗",
        (_, None) => "·",
    }
}

fn draw_history(frame: &mut Frame, app: &App, area: Rect) {
    let block = Block::bordered().title(" History (✓ verified, [ ] select) ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if app.history.is_empty() {
        let hint = Span::styled("no runs yet", Style::new().fg(Color::DarkGray));
        frame.render_widget(Paragraph::new(hint), inner);
        return;
    }
    let height = inner.height as usize;
    let selected = app.selected.unwrap_or(0);
    let first = (selected + 1).saturating_sub(height);
    let width = inner.width as usize;
    let lines: Vec<Line> = app
        .history
        .iter()
        .enumerate()
        .skip(first)
        .take(height)
        .map(|(at, entry)| {
            let prompt = entry.prompt.replace('\n', " ");
            let text = head(
                &format!("{} #{} {prompt}", history_mark(entry), at + 1),
                width,
            );
            let style = if Some(at) == app.selected {
                Style::new().add_modifier(Modifier::REVERSED)
            } else {
                Style::new()
            };
            Line::styled(text, style)
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

fn draw_output(frame: &mut Frame, app: &App, area: Rect) {
    let title = match app.shown() {
        Some(HistoryEntry {
            server: Some(server),
            ..
        }) => format!(
            " Output · run #{} on {server} ",
            app.selected.unwrap_or(0) + 1
        ),
        Some(_) => format!(" Output · run #{} ", app.selected.unwrap_or(0) + 1),
        None => " Output ".to_string(),
    };
    let block = Block::bordered().title(title);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(entry) = app.shown() else {
        let hint = "Write a prompt, then r (or F5) runs it; tokens stream here.";
        let hint = Span::styled(hint, Style::new().fg(Color::DarkGray));
        frame.render_widget(Paragraph::new(hint), inner);
        return;
    };
    let width = inner.width as usize;
    let dim = Style::new().fg(Color::DarkGray);
    let mut lines: Vec<Line> = wrap(&format!("› {}", entry.prompt), width, None)
        .lines
        .into_iter()
        .map(|l| Line::styled(l, dim))
        .collect();
    lines.extend(
        wrap(&entry.output, width, None)
            .lines
            .into_iter()
            .map(Line::from),
    );
    if let RunState::Failed(message) = &entry.state {
        let red = Style::new().fg(Color::Red);
        lines.extend(
            wrap(&format!("error: {message}"), width, None)
                .lines
                .into_iter()
                .map(|l| Line::styled(l, red)),
        );
    }
    let height = inner.height as usize;
    let scroll = app.output_scroll.min(lines.len().saturating_sub(height));
    let first = lines.len().saturating_sub(height + scroll);
    let shown: Vec<Line> = lines.into_iter().skip(first).take(height).collect();
    frame.render_widget(Paragraph::new(shown), inner);
}

fn draw_receipt(frame: &mut Frame, app: &App, area: Rect) {
    let block = Block::bordered().title(" Receipt ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(entry) = app.shown() else {
        let hint = Span::styled("no receipt yet", Style::new().fg(Color::DarkGray));
        frame.render_widget(Paragraph::new(hint), inner);
        return;
    };
    let RunState::Done(outcome) = &entry.state else {
        let text = match entry.state {
            RunState::Running => "written when the run ends",
            _ => "no receipt: the run failed",
        };
        let hint = Span::styled(text, Style::new().fg(Color::DarkGray));
        frame.render_widget(Paragraph::new(hint), inner);
        return;
    };
    let width = (inner.width as usize).saturating_sub(8);
    let row = |label: &str, value: String, style: Style| {
        Line::from(vec![
            Span::styled(
                format!("{label:<8}"),
                Style::new().add_modifier(Modifier::BOLD),
            ),
            Span::styled(value, style),
        ])
    };
    let (verify, verify_style) = match &entry.verdict {
        None => (
            "not verified yet (v)".to_string(),
            Style::new().fg(Color::DarkGray),
        ),
        Some(verdict) => {
            let color = match verdict {
                Verdict::Match { .. } => Color::Green,
                _ => Color::Red,
            };
            (
                verdict_line(verdict),
                Style::new().fg(color).add_modifier(Modifier::BOLD),
            )
        }
    };
    let lines = vec![
        row(
            "file",
            tail(&outcome.receipt.to_string_lossy(), width),
            Style::new(),
        ),
        row("sha256", head(&outcome.receipt_sha256, width), Style::new()),
        row("logits", head(&outcome.logits_digest, width), Style::new()),
        row("verify", head(&verify, width), verify_style),
    ];
    frame.render_widget(Paragraph::new(lines), inner);
}

fn draw_picker(frame: &mut Frame, picker: &Picker, over: Rect) {
    let area = over.inner(ratatui::layout::Margin::new(2, 1));
    frame.render_widget(Clear, area);
    let title = format!(
        " Pick a model: {} ",
        tail(
            &picker.dir.to_string_lossy(),
            area.width.saturating_sub(18) as usize
        )
    );
    let block = Block::bordered()
        .title(title)
        .border_style(Style::new().fg(Color::Yellow));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let mut lines: Vec<Line> = Vec::new();
    if let Some(error) = &picker.error {
        lines.push(Line::styled(error.clone(), Style::new().fg(Color::Red)));
    }
    let height = (inner.height as usize).saturating_sub(lines.len());
    let first = (picker.selected + 1).saturating_sub(height);
    for (at, entry) in picker.entries.iter().enumerate().skip(first).take(height) {
        let style = if at == picker.selected {
            Style::new().add_modifier(Modifier::REVERSED)
        } else if entry.is_dir {
            Style::new().fg(Color::Blue)
        } else {
            Style::new()
        };
        lines.push(Line::styled(entry.label(&picker.dir), style));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::{Effect, focus_index};
    use crate::worker::{Job, Progress, RunOutcome, WorkerEvent};
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use std::path::Path;
    use std::time::Duration;

    /// The screen as text rows, and the terminal for cursor checks.
    fn render(app: &App, width: u16, height: u16) -> (Vec<String>, Terminal<TestBackend>) {
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal.draw(|frame| draw(frame, app)).unwrap();
        let buffer = terminal.backend().buffer();
        let rows = (0..height)
            .map(|y| {
                (0..width)
                    .map(|x| buffer[(x, y)].symbol())
                    .collect::<String>()
            })
            .collect();
        (rows, terminal)
    }

    fn screen(app: &App) -> String {
        render(app, 100, 30).0.join("\n")
    }

    fn key(app: &mut App, code: KeyCode) -> Effect {
        app.handle_key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn app() -> (tempfile::NamedTempFile, App) {
        let model = tempfile::Builder::new().suffix(".gguf").tempfile().unwrap();
        let app = App::new(model.path(), Path::new("/"));
        (model, app)
    }

    #[test]
    fn at_100x30_every_field_action_and_pane_is_on_screen() {
        let (model, app) = app();
        let (rows, _) = render(&app, 100, 30);
        let text = rows.join("\n");
        for label in [
            "Server         none: in-process",
            "Model",
            "Chat template  on",
            "Operation set  reproducible",
            "Device         cpu",
            "Partitions     1",
            "Max tokens     64",
            "Temperature    0",
            "Top-p          1",
            "Seed           0",
            "Prompt",
            "[ Run ]",
            "[ Verify ]",
            "History",
            "Output",
            "Receipt",
        ] {
            assert!(text.contains(label), "{label:?} missing from\n{text}");
        }
        let file_name = model.path().file_name().unwrap().to_str().unwrap();
        assert!(
            rows[2].contains(file_name),
            "model row shows the file name: {}",
            rows[2]
        );
        assert_eq!(rows[28].trim(), "ready");
        assert!(
            rows[29].contains("q quit") && rows[29].contains("r run"),
            "{}",
            rows[29]
        );
        assert!(rows[29].contains("v verify") && rows[29].contains("o model"));
    }

    #[test]
    fn editing_the_prompt_shows_the_text_and_the_cursor() {
        let (_model, mut app) = app();
        key(&mut app, KeyCode::Enter);
        for c in "Hi\nthere".chars() {
            let code = if c == '\n' {
                KeyCode::Enter
            } else {
                KeyCode::Char(c)
            };
            key(&mut app, code);
        }
        let (rows, mut terminal) = render(&app, 100, 30);
        let prompt_top = rows
            .iter()
            .position(|r| r.contains("Prompt · editing"))
            .unwrap();
        assert!(
            rows[prompt_top + 1].starts_with("│Hi "),
            "{}",
            rows[prompt_top + 1]
        );
        assert!(rows[prompt_top + 2].starts_with("│there "));
        terminal
            .backend_mut()
            .assert_cursor_position((6, prompt_top as u16 + 2));
        assert!(rows[29].contains("Enter new line") && rows[29].contains("Esc done"));
    }

    #[test]
    fn editing_a_setting_puts_the_cursor_after_its_text() {
        let (_model, mut app) = app();
        app.focus = focus_index(Focus::Field(Field::Seed));
        key(&mut app, KeyCode::Enter);
        key(&mut app, KeyCode::Char('7'));
        let (rows, mut terminal) = render(&app, 100, 30);
        assert!(rows[10].contains("Seed           07"), "{}", rows[10]);
        terminal
            .backend_mut()
            .assert_cursor_position((1 + 15 + 2, 10));
    }

    #[test]
    fn streamed_tokens_status_receipt_and_verdict_are_shown() {
        let (_model, mut app) = app();
        app.form.prompt.set("What is the capital of France?");
        assert!(matches!(
            key(&mut app, KeyCode::Char('r')),
            Effect::Submit(Job::Generate(_))
        ));
        app.apply(WorkerEvent::Prefilling { prompt_tokens: 30 });
        app.apply(WorkerEvent::Token {
            text: "The capital of France is".into(),
            progress: Progress {
                prefill: Duration::from_millis(500),
                tokens: 5,
                decode: Duration::from_millis(400),
            },
        });
        let text = screen(&app);
        assert!(text.contains("› What is the capital of France?"), "{text}");
        assert!(text.contains("The capital of France is"));
        assert!(text.contains("generating: 5 tokens · prefill 60.0 tok/s · decode 10.0 tok/s"));
        assert!(text.contains("[ Running… ]"));
        assert!(text.contains("… #1 What is the capital"));
        app.apply(WorkerEvent::Generated(RunOutcome {
            text: "The capital of France is Paris.".into(),
            prompt_tokens: 30,
            generated_tokens: 9,
            prefill_tokens_per_second: 61.5,
            decode_tokens_per_second: 9.75,
            receipt: "/tmp/receipts/generation-1-1.json".into(),
            receipt_sha256: "0123456789abcdef".repeat(4),
            logits_digest: "fedcba9876543210".repeat(4),
        }));
        app.apply(WorkerEvent::Verified {
            receipt: "/tmp/receipts/generation-1-1.json".into(),
            verdict: Verdict::Match { steps: 9 },
        });
        let text = screen(&app);
        assert!(text.contains("The capital of France is Paris."));
        assert!(text.contains("done: prefill 30 tokens 61.5 tok/s · decode 8 tokens 9.75 tok/s"));
        assert!(text.contains("file    /tmp/receipts/generation-1-1.json"));
        assert!(text.contains("sha256  0123456789abcdef0123456789abcdef"));
        assert!(text.contains("logits  fedcba9876543210fedcba9876543210"));
        assert!(text.contains("verify  MATCH: 9 tokens, logits bit-identical"));
        assert!(text.contains("✓ #1 What is the capital"));
    }

    #[test]
    fn errors_are_shown_on_the_status_line() {
        let (_model, mut app) = app();
        app.form.prompt.set("x");
        app.form.device.set("cuda:1");
        key(&mut app, KeyCode::Char('r'));
        app.apply(WorkerEvent::Failed(
            "Device cuda:1: no CUDA driver found (libcuda.so); run with --device cpu".into(),
        ));
        let (rows, _) = render(&app, 100, 30);
        assert!(
            rows[28].starts_with("error: Device cuda:1: no CUDA driver found"),
            "{}",
            rows[28]
        );
        assert!(rows.iter().any(|r| r.contains("! #1 x")));
        assert!(
            rows.iter()
                .any(|r| r.contains("no receipt: the run failed"))
        );
    }

    #[test]
    fn a_server_greys_out_what_it_decides() {
        let (_model, mut app) = app();
        app.form.server.set("http://127.0.0.1:8080");
        app.form.prompt.set("Hi");
        let text = screen(&app);
        assert!(
            text.contains("Server         http://127.0.0.1:8080"),
            "{text}"
        );
        for label in ["Operation set", "Device", "Partitions"] {
            assert!(
                text.contains(&format!("{label:<15}set by the server")),
                "{label} not greyed out:\n{text}"
            );
        }
        assert!(text.contains("ready · runs go to the Server"), "{text}");
        assert!(text.contains("Max tokens     64"), "{text}");
        assert!(matches!(
            key(&mut app, KeyCode::Char('r')),
            Effect::Submit(Job::Generate(_))
        ));
        app.apply(WorkerEvent::Sent {
            server: "http://127.0.0.1:8080".into(),
        });
        let text = screen(&app);
        assert!(
            text.contains("Output · run #1 on http://127.0.0.1:8080"),
            "{text}"
        );
        assert!(text.contains("sent to http://127.0.0.1:8080: waiting"));
        // Editing the Server teaches what it takes.
        app.activity = crate::app::Activity::Idle;
        app.focus = focus_index(Focus::Field(Field::Server));
        key(&mut app, KeyCode::Enter);
        assert!(screen(&app).contains("e.g. http://127.0.0.1:8080; empty: run in-process"));
    }

    #[test]
    fn the_picker_lists_model_files_over_the_output() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("SmolLM2.gguf"), vec![0u8; 1_500_000]).unwrap();
        let mut app = App::new(&dir.path().join("none.gguf"), dir.path());
        key(&mut app, KeyCode::Char('o'));
        let text = screen(&app);
        assert!(text.contains("Pick a model: "), "{text}");
        assert!(text.contains("SmolLM2.gguf  1.5 MB"));
        assert!(text.contains("Esc cancel"));
    }

    #[test]
    fn tiny_terminals_draw_without_panicking() {
        let (_model, mut app) = app();
        app.form
            .prompt
            .set("a long prompt that will not fit anywhere");
        key(&mut app, KeyCode::Enter);
        for (width, height) in [(1, 1), (10, 3), (30, 8), (44, 30), (45, 12)] {
            render(&app, width, height);
        }
    }
}
