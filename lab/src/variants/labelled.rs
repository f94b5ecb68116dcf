//! Labelled images a user brings, and top-1 against their labels: a folder with a
//! folder per class, or a CSV of `image,label` rows. A class is named as the task's
//! label file names it, or by its index. Both the original and its copy answer every
//! image, so the copy's accuracy is measured on the same footing as the original's.

use std::path::{Path, PathBuf};

use modelless::{Inputs, Runtime, Slo};

use super::MakeError;
use super::agreement::{share, top1};

/// One image and the class it shows.
#[derive(Clone, Debug, PartialEq)]
pub struct LabelledImage {
    /// The image file.
    pub path: PathBuf,
    /// Its class index.
    pub class: usize,
}

/// How two variants did against the labels of the same images.
#[derive(Clone, Debug, PartialEq)]
pub struct LabelScore {
    /// Images both answered.
    pub images: usize,
    /// Of those, the images the original's top-1 class is the label of.
    pub original_correct: usize,
    /// Of those, the images the copy's top-1 class is the label of.
    pub copy_correct: usize,
    /// Of those, the images both gave the same top-1 class.
    pub agreed: usize,
}

impl LabelScore {
    /// The original's top-1 accuracy, in percent.
    pub fn original_accuracy(&self) -> f64 {
        percent(self.original_correct, self.images)
    }

    /// The copy's top-1 accuracy, in percent.
    pub fn copy_accuracy(&self) -> f64 {
        percent(self.copy_correct, self.images)
    }
}

fn percent(part: usize, whole: usize) -> f64 {
    100.0 * share(part, whole)
}

/// The labelled images at `path`: a CSV file of `image,label` rows (image paths
/// relative to the file's folder; a first row `image,label` or `path,label` is a
/// header), or a folder holding a folder per class with its JPEG and PNG images.
/// `labels` are the task's class names, the line number being the index.
pub fn labelled_images(path: &Path, labels: Option<&[String]>) -> Result<Vec<LabelledImage>, MakeError> {
    let images = if path.is_dir() { from_class_folders(path, labels)? } else { from_csv(path, labels)? };
    if images.is_empty() {
        return Err(MakeError::Config(format!("{}: no labelled images", path.display())));
    }
    Ok(images)
}

fn from_class_folders(folder: &Path, labels: Option<&[String]>) -> Result<Vec<LabelledImage>, MakeError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| MakeError::Io { path, source }
    };
    let mut classes: Vec<PathBuf> = std::fs::read_dir(folder)
        .map_err(io(folder))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    classes.sort();
    let mut images = Vec::new();
    for class_folder in classes {
        let name = class_folder.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let class = class_index(&name, labels)
            .map_err(|why| MakeError::Config(format!("labelled images: folder {}: {why}", class_folder.display())))?;
        let files = crate::load::images::image_files(&class_folder).map_err(io(&class_folder))?;
        images.extend(files.into_iter().map(|path| LabelledImage { path, class }));
    }
    Ok(images)
}

fn from_csv(file: &Path, labels: Option<&[String]>) -> Result<Vec<LabelledImage>, MakeError> {
    let text = std::fs::read_to_string(file).map_err(|source| MakeError::Io { path: file.into(), source })?;
    let base = file.parent().unwrap_or(Path::new("."));
    let mut images = Vec::new();
    for (number, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l.trim_end_matches('\r'))) {
        let bad = |why: String| MakeError::Config(format!("labelled images: {} line {number}: {why}", file.display()));
        if line.trim().is_empty() {
            continue;
        }
        let fields = csv_fields(line).map_err(|why| bad(why.into()))?;
        let [image, label] = fields.as_slice() else {
            return Err(bad(format!("{} fields where `image,label` has two", fields.len())));
        };
        if number == 1 && matches!(image.as_str(), "image" | "path" | "file") && label == "label" {
            continue;
        }
        let class = class_index(label, labels).map_err(bad)?;
        images.push(LabelledImage { path: base.join(image), class });
    }
    Ok(images)
}

/// The fields of one CSV row; a field in double quotes may hold commas, and `""`
/// inside it is a quote.
fn csv_fields(line: &str) -> Result<Vec<String>, &'static str> {
    let (mut fields, mut field, mut chars) = (Vec::new(), String::new(), line.chars().peekable());
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', true) => quoted = false,
            ('"', false) if field.trim().is_empty() => (field, quoted) = (String::new(), true),
            (',', false) => fields.push(std::mem::take(&mut field).trim().to_string()),
            _ => field.push(c),
        }
    }
    if quoted {
        return Err("a quote is not closed");
    }
    fields.push(field.trim().to_string());
    Ok(fields)
}

/// The class `name` names: a line of `labels`, or else an index.
fn class_index(name: &str, labels: Option<&[String]>) -> Result<usize, String> {
    if let Some(index) = labels.and_then(|l| l.iter().position(|label| label == name)) {
        return Ok(index);
    }
    match (name.parse::<usize>(), labels) {
        (Ok(index), Some(labels)) if index < labels.len() => Ok(index),
        (Ok(index), None) => Ok(index),
        (_, Some(labels)) => Err(format!(
            "class `{name}` is neither a line of the task's label file nor an index below its {}",
            labels.len()
        )),
        (Err(_), None) => Err(format!("class `{name}` is not an index, and the task has no `labels` file to name it")),
    }
}

/// Sends every image to `original` and to `copy` of `task` (both loaded in
/// `runtime`) and counts how often each one's top-1 class is the label, and how
/// often theirs agree; `on_image` sees each image done.
pub fn top1_against_labels(
    runtime: &Runtime,
    task: &str,
    (original, copy): (&str, &str),
    images: &[LabelledImage],
    on_image: &mut dyn FnMut(usize),
) -> Result<LabelScore, MakeError> {
    let mut score = LabelScore { images: 0, original_correct: 0, copy_correct: 0, agreed: 0 };
    for (done, image) in images.iter().enumerate() {
        let bytes = std::fs::read(&image.path).map_err(|source| MakeError::Io { path: image.path.clone(), source })?;
        let class_of = |variant: &str| -> Result<usize, MakeError> {
            let output = runtime.submit_variant(task, variant, Inputs::image(bytes.clone()), Slo::default())?.wait()?;
            let scores = output.first().ok_or_else(|| MakeError::Config(format!("`{variant}` gave no output")))?;
            top1(scores).ok_or_else(|| MakeError::Config(format!("`{variant}`'s output is not f32 scores")))
        };
        let named = |e: MakeError| MakeError::Config(format!("labelled image {}: {e}", image.path.display()));
        let (by_original, by_copy) = (class_of(original).map_err(named)?, class_of(copy).map_err(named)?);
        score.images += 1;
        score.original_correct += usize::from(by_original == image.class);
        score.copy_correct += usize::from(by_copy == image.class);
        score.agreed += usize::from(by_original == by_copy);
        on_image(done + 1);
    }
    Ok(score)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> Vec<String> {
        ["tench", "goldfish", "tabby, tabby cat"].iter().map(|s| s.to_string()).collect()
    }

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"not read here").unwrap();
    }

    #[test]
    fn a_folder_per_class_is_named_by_label_or_by_index() {
        let dir = tempfile::tempdir().unwrap();
        touch(&dir.path().join("goldfish/b.jpg"));
        touch(&dir.path().join("goldfish/a.PNG"));
        touch(&dir.path().join("goldfish/notes.txt"));
        touch(&dir.path().join("2/c.jpeg"));
        let images = labelled_images(dir.path(), Some(&labels())).unwrap();
        let got: Vec<(String, usize)> =
            images.iter().map(|i| (i.path.strip_prefix(dir.path()).unwrap().display().to_string(), i.class)).collect();
        assert_eq!(got, [("2/c.jpeg".into(), 2), ("goldfish/a.PNG".into(), 1), ("goldfish/b.jpg".into(), 1)]);
    }

    #[test]
    fn a_csv_names_images_beside_it_and_may_quote_a_label_with_commas() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("set.csv");
        std::fs::write(&csv, "image,label\nx/1.jpg,goldfish\r\n\n2.png,\"tabby, tabby cat\"\n3.png, 0\n").unwrap();
        let images = labelled_images(&csv, Some(&labels())).unwrap();
        let classes: Vec<usize> = images.iter().map(|i| i.class).collect();
        assert_eq!(classes, [1, 2, 0]);
        assert_eq!(images[0].path, dir.path().join("x/1.jpg"));
    }

    #[test]
    fn an_unknown_class_or_a_bad_row_is_refused_with_where_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("set.csv");
        std::fs::write(&csv, "a.jpg,goldfish\nb.jpg,platypus\n").unwrap();
        let err = labelled_images(&csv, Some(&labels())).unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("`platypus`") && err.contains("below its 3"), "{err}");
        std::fs::write(&csv, "a.jpg,3\n").unwrap();
        let err = labelled_images(&csv, Some(&labels())).unwrap_err().to_string();
        assert!(err.contains("`3`"), "an index past the labels: {err}");
        std::fs::write(&csv, "a.jpg,goldfish,extra\n").unwrap();
        assert!(labelled_images(&csv, Some(&labels())).unwrap_err().to_string().contains("3 fields"));
        std::fs::write(&csv, "a.jpg,\"goldfish\n").unwrap();
        assert!(labelled_images(&csv, Some(&labels())).unwrap_err().to_string().contains("quote"));
        std::fs::write(&csv, "a.jpg,goldfish\n").unwrap();
        let err = labelled_images(&csv, None).unwrap_err().to_string();
        assert!(err.contains("no `labels` file"), "{err}");
        let gone = csv.with_file_name("gone.csv");
        assert!(matches!(labelled_images(&gone, None), Err(MakeError::Io { path, .. }) if path == gone));
        std::fs::write(&csv, "image,label\n").unwrap();
        assert!(labelled_images(&csv, None).unwrap_err().to_string().contains("no labelled images"));
        let folder = dir.path().join("classes");
        touch(&folder.join("platypus/a.jpg"));
        let err = labelled_images(&folder, Some(&labels())).unwrap_err().to_string();
        assert!(err.contains("platypus"), "{err}");
    }

    #[test]
    fn accuracies_are_shares_of_the_images_answered() {
        let score = LabelScore { images: 8, original_correct: 6, copy_correct: 5, agreed: 7 };
        assert_eq!((score.original_accuracy(), score.copy_accuracy()), (75.0, 62.5));
        let none = LabelScore { images: 0, original_correct: 0, copy_correct: 0, agreed: 0 };
        assert_eq!(none.copy_accuracy(), 0.0);
    }
}
