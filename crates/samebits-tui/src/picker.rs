//! The model file picker: one folder's subfolders and `.gguf` files, to walk with the arrows and
//! choose from with Enter.

use ratatui::crossterm::event::{KeyCode, KeyEvent};
use std::path::{Path, PathBuf};

/// One row of the picker.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub path: PathBuf,
    pub is_dir: bool,
    /// File size in bytes (0 for folders).
    pub size: u64,
}

impl Entry {
    /// The row's text: `../` for the parent, `name/` for folders, `name  98.4 MB` for files.
    pub fn label(&self, parent: &Path) -> String {
        if Some(self.path.as_path()) == parent.parent() {
            return "../".into();
        }
        let name = self
            .path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        if self.is_dir {
            format!("{name}/")
        } else {
            format!("{name}  {:.1} MB", self.size as f64 / 1e6)
        }
    }
}

/// A folder's listing and the highlighted row.
#[derive(Clone, Debug, PartialEq)]
pub struct Picker {
    pub dir: PathBuf,
    pub entries: Vec<Entry>,
    pub selected: usize,
    /// Why the folder could not be listed, when it could not.
    pub error: Option<String>,
}

/// What a key did to the picker.
#[derive(Clone, Debug, PartialEq)]
pub enum PickerOutcome {
    /// Still choosing.
    Open,
    /// This file was chosen.
    Chosen(PathBuf),
    /// Closed without a choice.
    Cancelled,
}

impl Picker {
    /// Lists `dir` (its parent first, then folders, then `.gguf` files, each sorted by name).
    pub fn open(dir: &Path) -> Picker {
        let mut picker = Picker {
            dir: dir.to_path_buf(),
            entries: Vec::new(),
            selected: 0,
            error: None,
        };
        picker.list();
        picker
    }

    fn list(&mut self) {
        self.entries.clear();
        self.selected = 0;
        self.error = None;
        if let Some(parent) = self.dir.parent() {
            self.entries.push(Entry {
                path: parent.to_path_buf(),
                is_dir: true,
                size: 0,
            });
        }
        let read = match std::fs::read_dir(&self.dir) {
            Ok(read) => read,
            Err(e) => {
                self.error = Some(format!("cannot list {}: {e}", self.dir.display()));
                return;
            }
        };
        let mut found: Vec<Entry> = read
            .filter_map(|entry| {
                let entry = entry.ok()?;
                let path = entry.path();
                let metadata = std::fs::metadata(&path).ok()?;
                let is_gguf = path
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
                (metadata.is_dir() || (metadata.is_file() && is_gguf)).then(|| Entry {
                    path,
                    is_dir: metadata.is_dir(),
                    size: if metadata.is_dir() { 0 } else { metadata.len() },
                })
            })
            .collect();
        found.sort_by(|a, b| b.is_dir.cmp(&a.is_dir).then_with(|| a.path.cmp(&b.path)));
        self.entries.extend(found);
        // Start on the first file when there is one, else on the first subfolder.
        let first_file = self.entries.iter().position(|e| !e.is_dir);
        let first_subfolder = usize::from(self.dir.parent().is_some());
        self.selected =
            first_file.unwrap_or(first_subfolder.min(self.entries.len().saturating_sub(1)));
    }

    /// Up / Down move, Enter opens a folder or chooses a file, Backspace goes to the parent, Esc
    /// cancels.
    pub fn handle_key(&mut self, key: KeyEvent) -> PickerOutcome {
        match key.code {
            KeyCode::Up => self.selected = self.selected.saturating_sub(1),
            KeyCode::Down => {
                self.selected = (self.selected + 1).min(self.entries.len().saturating_sub(1));
            }
            KeyCode::Enter => {
                if let Some(entry) = self.entries.get(self.selected).cloned() {
                    if !entry.is_dir {
                        return PickerOutcome::Chosen(entry.path);
                    }
                    self.dir = entry.path;
                    self.list();
                }
            }
            KeyCode::Backspace => {
                if let Some(parent) = self.dir.parent() {
                    self.dir = parent.to_path_buf();
                    self.list();
                }
            }
            KeyCode::Esc => return PickerOutcome::Cancelled,
            _ => {}
        }
        PickerOutcome::Open
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::KeyModifiers;

    fn press(picker: &mut Picker, code: KeyCode) -> PickerOutcome {
        picker.handle_key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    #[test]
    fn lists_folders_and_gguf_files_and_chooses_one() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("models")).unwrap();
        std::fs::write(root.path().join("models/b.gguf"), b"x").unwrap();
        std::fs::write(root.path().join("models/a.GGUF"), b"xy").unwrap();
        std::fs::write(root.path().join("notes.txt"), b"").unwrap();
        let mut picker = Picker::open(root.path());
        let labels: Vec<String> = picker
            .entries
            .iter()
            .map(|e| e.label(&picker.dir))
            .collect();
        assert_eq!(labels, ["../", "models/"], "no .txt, parent first");
        assert_eq!(picker.selected, 1, "on the first subfolder");
        assert_eq!(press(&mut picker, KeyCode::Enter), PickerOutcome::Open);
        assert_eq!(picker.dir, root.path().join("models"));
        let labels: Vec<String> = picker
            .entries
            .iter()
            .map(|e| e.label(&picker.dir))
            .collect();
        assert_eq!(labels, ["../", "a.GGUF  0.0 MB", "b.gguf  0.0 MB"]);
        assert_eq!(picker.selected, 1, "on the first file");
        press(&mut picker, KeyCode::Down);
        press(&mut picker, KeyCode::Down);
        let chosen = press(&mut picker, KeyCode::Enter);
        assert_eq!(
            chosen,
            PickerOutcome::Chosen(root.path().join("models/b.gguf"))
        );
        press(&mut picker, KeyCode::Backspace);
        assert_eq!(picker.dir, root.path());
        assert_eq!(press(&mut picker, KeyCode::Esc), PickerOutcome::Cancelled);
    }

    #[test]
    fn a_missing_folder_is_reported_not_fatal() {
        let mut picker = Picker::open(Path::new("/no/such/folder"));
        assert!(
            picker
                .error
                .as_deref()
                .unwrap()
                .starts_with("cannot list /no/such/folder")
        );
        assert_eq!(picker.entries.len(), 1, "only the parent");
        assert_eq!(press(&mut picker, KeyCode::Enter), PickerOutcome::Open);
        assert_eq!(picker.dir, Path::new("/no/such"));
    }
}
