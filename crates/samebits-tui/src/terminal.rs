//! The terminal session and the event loop: raw mode and the alternate screen on entry, and the
//! terminal given back on every way out (normal quit, an error, a panic on the UI thread, SIGINT
//! or SIGTERM from outside; Ctrl-C typed in raw mode is a key, which quits).

use crate::app::{App, Effect};
use crate::worker::{WORKER_THREAD, Worker};
use crate::{Config, ui};
use anyhow::{Context, Result, bail};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event};
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::crossterm::{cursor, execute};
use std::io::{IsTerminal, Stdout, stdout};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long the loop waits for a key before it looks at the engine's reports again.
const POLL: Duration = Duration::from_millis(30);

/// Raw mode and the alternate screen, restored on drop.
struct Session {
    terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl Session {
    fn enter() -> Result<Session> {
        if !stdout().is_terminal() || !std::io::stdin().is_terminal() {
            bail!("samebits tui needs a terminal (stdin and stdout are not both a tty)");
        }
        install_panic_hook();
        enable_raw_mode().context("cannot switch the terminal to raw mode")?;
        let session = Session {
            terminal: Terminal::new(CrosstermBackend::new(stdout()))?,
        };
        execute!(stdout(), EnterAlternateScreen).context("cannot open the alternate screen")?;
        Ok(session)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        restore();
    }
}

/// Leaves raw mode and the alternate screen and shows the cursor; safe to call more than once.
fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(stdout(), LeaveAlternateScreen, cursor::Show);
}

/// Restores the terminal before a panic on any thread but the engine's is reported (the engine
/// thread turns its panics into an error shown in the UI and must not tear the screen down).
fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current().name() == Some(WORKER_THREAD) {
            return;
        }
        restore();
        previous(info);
    }));
}

/// Runs the UI until the user quits.
pub fn run(config: Config) -> Result<()> {
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))
            .context("cannot watch for SIGINT / SIGTERM")?;
    }
    let worker =
        Worker::spawn(config.receipts_dir.clone()).context("cannot start the engine thread")?;
    let mut app = App::new(&config.model, &config.models_dir);
    if let Some(server) = &config.server {
        app.form.server.set(&server.to_string());
    }
    let mut session = Session::enter()?;
    while !interrupted.load(Ordering::Relaxed) {
        while let Ok(report) = worker.events.try_recv() {
            app.apply(report);
        }
        session.terminal.draw(|frame| ui::draw(frame, &app))?;
        match event::poll(POLL) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        }
        if let Event::Key(key) = event::read()? {
            match app.handle_key(key) {
                Effect::None => {}
                Effect::Quit => break,
                Effect::Submit(job) => worker.submit(job),
            }
        }
    }
    Ok(())
}
