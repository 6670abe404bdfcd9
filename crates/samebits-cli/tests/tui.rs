//! End to end: `samebits tui` in a real 100x30 terminal (a private tmux server), driven by keys
//! as a person would: type a prompt, turn the chat template off, set Max tokens, run SmolLM2,
//! watch the tokens stream, check the receipt, verify it, quit with `q`, and find the terminal
//! back in cooked mode. A second test types bad options and checks the errors are shown in the
//! UI and that Ctrl-C also gives the terminal back. Skipped, saying so on stderr, when tmux (or,
//! for the first, the SmolLM2 GGUF) is missing.
//!
//! Reference: greedy SmolLM2-135M-Instruct Q4_1 on the raw prompt "The capital of France is"
//! continues " Paris.\n\nThe answer is: 201" in an independent float64 NumPy forward
//! (crates/samebits-llm/tools/reference_forward.py; shared/README.md).

use samebits_testdata::{SMOLLM2_GGUF, cached, skip};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Generous: the test binary may be a dev build, whose kernels are unoptimized.
const GENERATION_TIMEOUT: Duration = Duration::from_secs(900);

/// A tmux server of its own (its own socket), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn command(&self, args: &[&str]) -> Output {
        let output = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs");
        assert!(
            output.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    /// Sends keys (tmux key names or literal text), then gives the UI a moment, so that an Esc is
    /// read on its own and not as the start of an escape sequence.
    fn keys(&self, keys: &[&str]) {
        for key in keys {
            self.command(&["send-keys", "-t", "tui", key]);
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    fn literal(&self, text: &str) {
        self.command(&["send-keys", "-t", "tui", "-l", text]);
        std::thread::sleep(Duration::from_millis(150));
    }

    fn screen(&self) -> String {
        let output = self.command(&["capture-pane", "-p", "-t", "tui"]);
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Polls the screen until `done` holds; every screen seen is handed to `seen`.
    fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        mut seen: impl FnMut(&str),
        done: impl Fn(&str) -> bool,
    ) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            seen(&screen);
            if done(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < timeout,
                "timed out waiting for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait(&self, what: &str, timeout: Duration, done: impl Fn(&str) -> bool) -> String {
        self.wait_for(what, timeout, |_| {}, done)
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

impl Tmux {
    /// Starts `samebits tui --model MODEL --receipts-dir RECEIPTS` in a 100x30 pane of a new
    /// server. After the UI exits the pane prints its exit status and the terminal's `icanon` and
    /// `echo` settings (so the screen shows whether raw mode was undone) and stays open.
    fn start(name: &str, model: &Path, receipts: &Path) -> Tmux {
        let tmux = Tmux {
            socket: format!("samebits-tui-{name}-{}", std::process::id()),
        };
        let script = format!(
            "'{}' tui --model '{}' --receipts-dir '{}'; echo \"exit status $?\"; stty -a | tr ' ' '\\n' | grep -x -e icanon -e -icanon -e echo -e -echo | tr '\\n' ' '; echo; sleep 600",
            env!("CARGO_BIN_EXE_samebits"),
            model.display(),
            receipts.display()
        );
        tmux.command(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "tui",
            "-x",
            "100",
            "-y",
            "30",
            "sh",
            "-c",
            &script,
        ]);
        tmux
    }
}

/// The value after `label` on the screen row that starts the Receipt pane's `label` line.
fn receipt_field(screen: &str, label: &str) -> String {
    let line = screen
        .lines()
        .find_map(|l| l.split_once(&format!("│{label:<8}")).map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("no {label} row in the receipt pane:\n{screen}"));
    line.trim_end_matches(['│', ' '])
        .trim_end_matches('…')
        .to_string()
}

fn only_file_in(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        files.len(),
        1,
        "one receipt in {}: {files:?}",
        dir.display()
    );
    files[0].clone()
}

#[test]
fn tui_runs_smollm2_streams_verifies_and_quits_cleanly() {
    if Command::new("tmux").arg("-V").output().is_err() {
        return skip("tmux is not installed");
    }
    let Some(model) = cached(SMOLLM2_GGUF) else {
        return;
    };
    let receipts = tempfile::tempdir().unwrap();
    let tmux = Tmux::start("run", &model, receipts.path());
    // The whole first screen: the terminal may be captured while it is still being drawn.
    let start = tmux.wait("the UI", Duration::from_secs(60), |s| {
        s.contains("samebits · settings") && s.contains("q quit")
    });
    for shown in [
        "Model",
        "Chat template",
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
        "q quit",
    ] {
        assert!(
            start.contains(shown),
            "{shown:?} not on the first screen:\n{start}"
        );
    }

    // The focus starts on the Prompt: Enter, type, Esc.
    tmux.keys(&["Enter"]);
    tmux.literal("The capital of France is");
    tmux.keys(&["Escape"]);
    tmux.wait("the prompt", Duration::from_secs(10), |s| {
        s.contains("│The capital of France is") && !s.contains("editing")
    });
    // Up 8 to the Chat template, Space turns it off; Down 4 to Max tokens, set 12.
    tmux.keys(&["Up", "Up", "Up", "Up", "Up", "Up", "Up", "Up", "Space"]);
    tmux.keys(&["Down", "Down", "Down", "Down", "Enter", "BSpace", "BSpace"]);
    tmux.literal("12");
    tmux.keys(&["Enter"]);
    tmux.wait("the settings", Duration::from_secs(10), |s| {
        s.contains("Chat template  off") && s.contains("Max tokens     12")
    });

    tmux.keys(&["r"]);
    let mut streamed = false;
    let done = tmux.wait_for(
        "the receipt",
        GENERATION_TIMEOUT,
        |s| streamed |= s.contains("generating: ") && s.contains(" Paris"),
        |s| s.contains("not verified yet"),
    );
    assert!(
        streamed,
        "never saw tokens arrive with the generating status"
    );
    assert!(done.contains("› The capital of France is"), "{done}");
    assert!(done.contains(" Paris."), "{done}");
    assert!(done.contains("The answer is: 201"), "{done}");
    assert!(done.contains("done: prefill 5 tokens"), "{done}");
    assert!(done.contains("decode 11 tokens"), "{done}");
    assert!(done.contains("· #1 The capital of France is"), "{done}");

    // The receipt pane names the file and its digests; check them against the file.
    let receipt = only_file_in(receipts.path());
    let file_name = receipt.file_name().unwrap().to_str().unwrap();
    assert!(receipt_field(&done, "file").ends_with(file_name), "{done}");
    let sha256 = samebits_runtime::hashing::sha256_file(&receipt).unwrap();
    let shown_sha256 = receipt_field(&done, "sha256");
    assert!(
        shown_sha256.len() >= 32 && sha256.starts_with(&shown_sha256),
        "{done}"
    );
    let recorded: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&receipt).unwrap()).unwrap();
    let digest = recorded["logits_digest"].as_str().unwrap();
    let shown_digest = receipt_field(&done, "logits");
    assert!(
        shown_digest.len() >= 32 && digest.starts_with(&shown_digest),
        "{done}"
    );
    assert_eq!(recorded["chat"], false);
    assert_eq!(recorded["options"]["max_tokens"], 12);
    assert_eq!(recorded["tokens"].as_array().unwrap().len(), 12);

    tmux.keys(&["v"]);
    let verified = tmux.wait("the verification", GENERATION_TIMEOUT, |s| {
        s.contains("verify  MATCH") || s.contains("verify  MISMATCH") || s.contains("cannot verify")
    });
    assert!(
        verified.contains("verify  MATCH: 12 tokens, logits bit-identical"),
        "{verified}"
    );
    assert!(
        verified.contains("✓ #1 The capital of France is"),
        "{verified}"
    );
    eprintln!("the screen after the run and its verification:\n{verified}");

    tmux.keys(&["q"]);
    let after = tmux.wait("the exit", Duration::from_secs(30), |s| {
        // The terminal modes come a moment after the status: wait for both.
        s.contains("exit status") && s.contains("icanon")
    });
    assert!(after.contains("exit status 0"), "{after}");
    assert!(
        after.contains("icanon echo"),
        "terminal left in raw mode:\n{after}"
    );
    assert!(
        !after.contains("samebits · settings"),
        "alternate screen not left:\n{after}"
    );
}

#[test]
fn tui_shows_bad_options_in_the_ui_and_ctrl_c_restores_the_terminal() {
    if Command::new("tmux").arg("-V").output().is_err() {
        return skip("tmux is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    // An empty file: every error below is found before anything loads it.
    let model = dir.path().join("model.gguf");
    std::fs::write(&model, b"").unwrap();
    let tmux = Tmux::start("errors", &model, dir.path());
    tmux.wait("the UI", Duration::from_secs(60), |s| {
        s.contains("samebits · settings")
    });
    // Prompt "Hello"; Up 2 to Top-p, set it to 2, run.
    tmux.keys(&["Enter"]);
    tmux.literal("Hello");
    tmux.keys(&["Escape", "Up", "Up", "Enter", "BSpace"]);
    tmux.literal("2");
    tmux.keys(&["Enter", "r"]);
    let screen = tmux.wait("the Top-p error", Duration::from_secs(10), |s| {
        s.contains("error: ")
    });
    assert!(
        screen.contains("error: Top-p: expected a number in (0, 1], got \"2\""),
        "{screen}"
    );
    // Top-p back to 1; Up 4 to Device, set cuda:999, run: no machine has that GPU.
    tmux.keys(&["Enter", "BSpace"]);
    tmux.literal("1");
    tmux.keys(&["Enter", "Up", "Up", "Up", "Up", "Enter", "C-u"]);
    tmux.literal("cuda:999");
    tmux.keys(&["Enter", "r"]);
    let screen = tmux.wait("the device error", Duration::from_secs(30), |s| {
        s.contains("error: Device")
    });
    assert!(
        screen.contains("error: Device cuda:999: ") && screen.contains("--device cpu"),
        "{screen}"
    );
    assert!(
        screen.contains("! #1 Hello"),
        "the failed run is in the history:\n{screen}"
    );
    tmux.keys(&["C-c"]);
    let after = tmux.wait("the exit", Duration::from_secs(30), |s| {
        // The terminal modes come a moment after the status: wait for both.
        s.contains("exit status") && s.contains("icanon")
    });
    assert!(after.contains("exit status 0"), "{after}");
    assert!(
        after.contains("icanon echo"),
        "terminal left in raw mode:\n{after}"
    );
}
