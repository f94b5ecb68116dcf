//! Writing a tuned setting into the config file itself (`modelless tune --write`),
//! keeping its comments, its layout and every key the setting does not decide.

use std::path::Path;

use modelless::RuntimeConfig;
use toml_edit::{Array, DocumentMut, Item, Table, TableLike, value};

use super::{ServingSetting, TuneError};

/// Writes `setting` for `variant` of `task` into the config at `path`; the file is
/// replaced only once the edited text reads back as a valid config.
pub fn write_setting(path: &Path, task: &str, variant: &str, setting: &ServingSetting) -> Result<(), TuneError> {
    let text = std::fs::read_to_string(path).map_err(|source| TuneError::Read { path: path.into(), source })?;
    let edited = edit(&text, task, variant, setting)?;
    let base = path.parent().unwrap_or(Path::new("."));
    RuntimeConfig::from_toml(&edited, base).map_err(TuneError::EditedConfig)?;
    let partial = path.with_extension("toml.partial");
    std::fs::write(&partial, edited).map_err(|source| TuneError::Write { path: partial.clone(), source })?;
    std::fs::rename(&partial, path).map_err(|source| TuneError::Write { path: path.into(), source })
}

/// The config text with `setting` written in.
fn edit(text: &str, task: &str, variant: &str, setting: &ServingSetting) -> Result<String, TuneError> {
    let mut doc: DocumentMut = text.parse().map_err(TuneError::Toml)?;
    let onnx = table_in(doc.as_table_mut(), "onnxruntime")?;
    onnx.insert("intra_op_threads", value(setting.intra_op_threads as i64));
    onnx.insert("one_run_at_a_time", value(setting.one_run_at_a_time));
    onnx.insert("spinning", value(setting.spinning));
    if let Some(threads) = setting.preprocessing_threads {
        table_in(doc.as_table_mut(), "preprocessing")?.insert("threads", value(threads as i64));
    }
    let tasks = doc
        .get_mut("tasks")
        .and_then(Item::as_array_of_tables_mut)
        .ok_or_else(|| TuneError::Config("the config has no [[tasks]]".into()))?;
    let task_table = tasks
        .iter_mut()
        .find(|t| t.get("name").and_then(Item::as_str) == Some(task))
        .ok_or_else(|| TuneError::Config(format!("no [[tasks]] named `{task}`")))?;
    let variants = task_table
        .get_mut("variants")
        .and_then(Item::as_array_of_tables_mut)
        .ok_or_else(|| TuneError::Config(format!("task `{task}` has no [[tasks.variants]]")))?;
    let variant_table = variants
        .iter_mut()
        .find(|v| v.get("name").and_then(Item::as_str) == Some(variant))
        .ok_or_else(|| TuneError::UnknownVariant { task: task.into(), variant: variant.into() })?;
    variant_table.insert("instances", value(setting.instances as i64));
    let batching = variant_table.entry("batching").or_insert_with(|| Item::Table(Table::new()));
    let batching: &mut dyn TableLike = batching
        .as_table_like_mut()
        .ok_or_else(|| TuneError::Config("the variant's `batching` is not a table".into()))?;
    batching.insert("max_batch_size", value(setting.max_batch_size as i64));
    batching.insert("max_queue_delay_us", value(setting.max_queue_delay_us as i64));
    let sizes: Array = setting.preferred_batch_sizes.sizes(setting.max_batch_size).iter().map(|&s| s as i64).collect();
    batching.insert("preferred_batch_sizes", value(sizes));
    if let Some(cuda) = &setting.cuda {
        let onnx = variant_table.entry("onnx").or_insert_with(|| Item::Table(Table::new()));
        let onnx: &mut dyn TableLike =
            onnx.as_table_like_mut().ok_or_else(|| TuneError::Config("the variant's `onnx` is not a table".into()))?;
        let options = onnx.entry("cuda").or_insert_with(|| Item::Table(Table::new()));
        let options: &mut dyn TableLike = options
            .as_table_like_mut()
            .ok_or_else(|| TuneError::Config("the variant's `onnx.cuda` is not a table".into()))?;
        options.insert("conv_algo_search", value(cuda.search_name()));
        options.insert("tf32", value(cuda.tf32));
        options.insert("prefer_nhwc", value(cuda.prefer_nhwc));
        options.insert("conv_max_workspace", value(cuda.conv_max_workspace));
        options.insert("pinned_inputs", value(cuda.pinned_inputs));
        options.insert("cuda_graph", value(cuda.cuda_graph));
    }
    Ok(doc.to_string())
}

/// The top-level table `name`, made where it is missing.
fn table_in<'a>(root: &'a mut Table, name: &str) -> Result<&'a mut dyn TableLike, TuneError> {
    root.entry(name)
        .or_insert_with(|| Item::Table(Table::new()))
        .as_table_like_mut()
        .ok_or_else(|| TuneError::Config(format!("`{name}` in the config is not a table")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::{CudaSetting, PreferredSizes};

    const CONFIG: &str = r#"# The team's config.
[onnxruntime]
intra_op_threads = 2 # both cores

[[tasks]]
name = "classify"

[[tasks.variants]]
name = "small"
path = "small.onnx"
accuracy = 60.0
batching = { max_batch_size = 8, max_queue_size = 512 }

[[tasks.variants]]
name = "large"
path = "large.onnx"
accuracy = 70.0
"#;

    fn setting() -> ServingSetting {
        ServingSetting {
            max_batch_size: 12,
            max_queue_delay_us: 1500,
            preferred_batch_sizes: PreferredSizes::PowersOfTwo,
            instances: 2,
            intra_op_threads: 1,
            one_run_at_a_time: true,
            spinning: false,
            preprocessing_threads: None,
            cuda: None,
        }
    }

    #[test]
    fn the_setting_lands_on_its_variant_and_everything_else_stays() {
        let edited = edit(CONFIG, "classify", "small", &setting()).unwrap();
        assert!(edited.starts_with("# The team's config."), "{edited}");
        let config = RuntimeConfig::from_toml(&edited, Path::new("/models")).unwrap();
        assert_eq!(config.onnxruntime.intra_op_threads, 1);
        assert!(config.onnxruntime.one_run_at_a_time);
        assert_eq!(config.onnxruntime.spinning, Some(false));
        let variants = &config.tasks[0].variants;
        assert_eq!(variants[0].instances, 2);
        assert_eq!(variants[0].batching.max_batch_size, 12);
        assert_eq!(variants[0].batching.max_queue_delay_us, 1500);
        assert_eq!(variants[0].batching.preferred_batch_sizes, vec![1, 2, 4, 8, 12]);
        assert_eq!(variants[0].batching.max_queue_size, 512, "a key the setting does not decide is kept");
        let untouched = RuntimeConfig::from_toml(CONFIG, Path::new("/models")).unwrap();
        assert_eq!(variants[1], untouched.tasks[0].variants[1], "the other variant is untouched");
    }

    #[test]
    fn a_gpu_variants_cuda_settings_land_in_its_onnx_table_beside_what_it_had() {
        let config = CONFIG.replace(
            "name = \"large\"\npath = \"large.onnx\"",
            "name = \"large\"\npath = \"large.onnx\"\ndevice = \"cuda:0\"\nonnx = { cuda = { memory_limit_mib = 4096 } }",
        );
        let cuda = CudaSetting {
            conv_algo_search: modelless::backend::ConvAlgoSearch::Heuristic,
            tf32: false,
            prefer_nhwc: true,
            conv_max_workspace: true,
            pinned_inputs: true,
            cuda_graph: true,
        };
        let edited = edit(&config, "classify", "large", &ServingSetting { cuda: Some(cuda), ..setting() }).unwrap();
        let read = RuntimeConfig::from_toml(&edited, Path::new("/models")).unwrap();
        let options = &read.tasks[0].variants[1].onnx.cuda;
        assert_eq!(CudaSetting::of(options), cuda);
        assert_eq!(options.memory_limit_mib, Some(4096), "a setting tune does not decide is kept");
        assert!(read.tasks[0].variants[0].onnx.cuda.is_default(), "the other variant is untouched");
    }

    #[test]
    fn an_unknown_task_or_variant_is_refused_and_the_file_is_kept() {
        assert!(edit(CONFIG, "nope", "small", &setting()).is_err());
        assert!(edit(CONFIG, "classify", "nope", &setting()).is_err());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, CONFIG).unwrap();
        assert!(write_setting(&path, "classify", "nope", &setting()).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), CONFIG);
        write_setting(&path, "classify", "large", &setting()).unwrap();
        let written = RuntimeConfig::from_file(&path).unwrap();
        assert_eq!(written.tasks[0].variants[1].batching.max_batch_size, 12);
    }
}
