//! Adding a made variant to the config file: a copy of its original's table with its
//! own name, model file and accuracy (and where that accuracy came from), right after
//! its original. The rest of the file, comments included, stays as it was.

use std::path::Path;

use modelless::RuntimeConfig;
use toml_edit::{DocumentMut, Item, Table, value};

use super::MakeError;

/// What the new variant differs from its original in.
#[derive(Clone, Debug, PartialEq)]
pub struct NewVariant {
    /// Its name.
    pub name: String,
    /// Its model file's name, in its original's folder.
    pub file_name: String,
    /// Its accuracy.
    pub accuracy: f64,
    /// How the accuracy was had.
    pub accuracy_source: String,
}

/// Adds `new`, made from `from`, to `task` in the config at `path`; the file is
/// replaced only once the edited text reads back as a valid config.
pub fn add_variant(path: &Path, task: &str, from: &str, new: &NewVariant) -> Result<(), MakeError> {
    let text = std::fs::read_to_string(path).map_err(|source| MakeError::Io { path: path.into(), source })?;
    let edited = edited(&text, task, from, new)?;
    let base = path.parent().unwrap_or(Path::new("."));
    RuntimeConfig::from_toml(&edited, base)?;
    let partial = path.with_extension("toml.partial");
    std::fs::write(&partial, edited).map_err(|source| MakeError::Io { path: partial.clone(), source })?;
    std::fs::rename(&partial, path).map_err(|source| MakeError::Io { path: path.into(), source })
}

/// The config text with `new` added to `task`, right after `from`.
pub fn edited(text: &str, task: &str, from: &str, new: &NewVariant) -> Result<String, MakeError> {
    let mut doc: DocumentMut = text.parse().map_err(MakeError::Toml)?;
    let config = |what: String| MakeError::Config(what);
    let task_table = doc
        .get_mut("tasks")
        .and_then(Item::as_array_of_tables_mut)
        .and_then(|tasks| tasks.iter_mut().find(|t| t.get("name").and_then(Item::as_str) == Some(task)))
        .ok_or_else(|| config(format!("the config has no task `{task}`")))?;
    let variants = task_table
        .get_mut("variants")
        .and_then(Item::as_array_of_tables_mut)
        .ok_or_else(|| config(format!("task `{task}` has no [[tasks.variants]]")))?;
    let named = |t: &Table, name: &str| t.get("name").and_then(Item::as_str) == Some(name);
    if variants.iter().any(|t| named(t, &new.name)) {
        return Err(config(format!("task `{task}` has a variant `{}` already", new.name)));
    }
    let mut table = variants
        .iter()
        .find(|t| named(t, from))
        .cloned()
        .ok_or_else(|| config(format!("task `{task}` has no variant `{from}`")))?;
    // The original's comments describe the original.
    table.decor_mut().clear();
    table.decor_mut().set_prefix(format!("\n# Made from `{from}` by `modelless variants make`.\n"));
    let path = table
        .get("path")
        .and_then(Item::as_str)
        .map(|p| Path::new(p).with_file_name(&new.file_name))
        .ok_or_else(|| config(format!("variant `{from}` has no `path`")))?;
    table.insert("name", value(new.name.as_str()));
    table.insert("path", value(path.to_string_lossy().as_ref()));
    table.insert("accuracy", value(new.accuracy));
    table.insert("accuracy_source", value(new.accuracy_source.as_str()));
    // A copy is loaded when a policy or a request asks for it.
    table.remove("preload");
    // The clone keeps its original's place in the document: it is written after it.
    variants.push(table);
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"# The team's photos.
[[tasks]]
name = "classify-photo"
active = "lite0"

# The smallest EfficientNet-Lite.
[[tasks.variants]]
name = "lite0"
path = "models/lite0.onnx" # exported by hand
accuracy = 75.1
preload = true
batching = { max_batch_size = 8, max_queue_delay_us = 2000 }

[[tasks.variants]]
name = "lite1"
path = "models/lite1.onnx"
accuracy = 76.7
"#;

    fn fp16() -> NewVariant {
        NewVariant {
            name: "lite0-fp16".into(),
            file_name: "lite0.fp16.onnx".into(),
            accuracy: 74.9,
            accuracy_source: "estimated: lite0's 75.1 × 99.7 % top-1 agreement on 504 images".into(),
        }
    }

    #[test]
    fn the_copy_follows_its_original_and_every_comment_stays() {
        let text = edited(CONFIG, "classify-photo", "lite0", &fp16()).unwrap();
        for kept in ["# The team's photos.", "# The smallest EfficientNet-Lite.", "# exported by hand"] {
            assert_eq!(text.matches(kept).count(), 1, "{kept} kept once:\n{text}");
        }
        let config = RuntimeConfig::from_toml(&text, Path::new("/base")).unwrap();
        let variants = &config.tasks[0].variants;
        let names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["lite0", "lite0-fp16", "lite1"]);
        let copy = &variants[1];
        assert_eq!((copy.variant_accuracy(), copy.batching.max_batch_size, copy.preload), (74.9, 8, false));
        assert_eq!(copy.path, Path::new("/base/models/lite0.fp16.onnx"));
        assert!(copy.accuracy_source.as_deref().is_some_and(|s| s.starts_with("estimated")));
        assert_eq!(variants[0].accuracy_source, None);
    }

    #[test]
    fn unknown_tasks_and_variants_and_taken_names_are_refused() {
        assert!(edited(CONFIG, "nope", "lite0", &fp16()).unwrap_err().to_string().contains("no task `nope`"));
        assert!(edited(CONFIG, "classify-photo", "lite9", &fp16()).unwrap_err().to_string().contains("lite9"));
        let taken = NewVariant { name: "lite1".into(), ..fp16() };
        assert!(edited(CONFIG, "classify-photo", "lite0", &taken).unwrap_err().to_string().contains("already"));
    }
}
