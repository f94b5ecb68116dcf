//! The language kits' types, generated from the JSON Schemas of `schema/`: Python
//! TypedDicts, TypeScript interfaces, Go structs and Zig structs for the snapshot and
//! the decision. The committed files under `policies-wasm/` are checked against what
//! this writes (`committed_kits_match_the_schema`), so a kit cannot drift from the
//! contract; `MODELLESS_WRITE_SCHEMA=1 cargo test -p modelless-policy-abi --features
//! schema` writes them anew with the schemas.

mod go;
mod python;
mod rules_cases;
mod typescript;
mod zig;

pub use rules_cases::rules_cases;

use serde_json::Value;

/// A type a field has.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Ty {
    Bool,
    /// An integer, with the schema's format (`uint32`, `uint64`, `int64`, …).
    Int(String),
    Number,
    String,
    /// A definition, by name.
    Ref(String),
    Array(Box<Ty>),
    /// An object whose keys are strings.
    Map(Box<Ty>),
    Nullable(Box<Ty>),
    /// Anything JSON.
    Any,
}

/// A property of an object.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Field {
    pub name: String,
    pub ty: Ty,
    /// Present in every document (else it may be left out, and takes its default).
    pub required: bool,
    pub doc: Option<String>,
}

/// What a definition is.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Shape {
    Object(Vec<Field>),
    /// A string, one of these.
    StringEnum(Vec<String>),
    /// Any one of these definitions.
    Union(Vec<String>),
}

/// A named type of the contract.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Def {
    pub name: String,
    pub doc: Option<String>,
    pub shape: Shape,
}

/// Every type the snapshot and the decision use, in the schemas' order: the roots
/// first, then their definitions by name.
pub(crate) fn contract(snapshot: &Value, decision: &Value) -> Vec<Def> {
    let mut defs = Vec::new();
    for schema in [snapshot, decision] {
        defs.extend(root(schema));
        if let Some(Value::Object(named)) = schema.get("$defs") {
            defs.extend(named.iter().map(|(name, schema)| def(name, schema)));
        }
    }
    defs
}

/// The root of a schema: an object named by its title, or a union whose inline
/// members are named after their one required property (`{"error": …}`: `PolicyError`).
fn root(schema: &Value) -> Vec<Def> {
    let title = schema.get("title").and_then(Value::as_str).unwrap_or("Root").to_string();
    let Some(Value::Array(members)) = schema.get("anyOf") else { return vec![def(&title, schema)] };
    let mut defs = Vec::new();
    let mut names = Vec::new();
    for member in members {
        match member.get("$ref").and_then(Value::as_str) {
            Some(reference) => names.push(ref_name(reference)),
            None => {
                let property = member["required"][0].as_str().unwrap_or("member");
                let name = format!("Policy{}", pascal(property));
                defs.push(def(&name, member));
                names.push(name);
            }
        }
    }
    defs.push(Def { name: title, doc: doc(schema), shape: Shape::Union(names) });
    defs
}

fn def(name: &str, schema: &Value) -> Def {
    let shape = match schema.get("oneOf").or_else(|| schema.get("enum")) {
        Some(Value::Array(values)) => Shape::StringEnum(
            values
                .iter()
                .filter_map(|v| v.get("const").or(Some(v)).and_then(Value::as_str).map(str::to_string))
                .collect(),
        ),
        _ => {
            let required: Vec<&str> = match schema.get("required") {
                Some(Value::Array(r)) => r.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            let fields = match schema.get("properties") {
                Some(Value::Object(properties)) => properties
                    .iter()
                    .map(|(name, property)| Field {
                        name: name.clone(),
                        ty: ty(property),
                        required: required.contains(&name.as_str()),
                        doc: doc(property),
                    })
                    .collect(),
                _ => Vec::new(),
            };
            Shape::Object(fields)
        }
    };
    Def { name: name.to_string(), doc: doc(schema), shape }
}

fn ty(schema: &Value) -> Ty {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        return Ty::Ref(ref_name(reference));
    }
    if let Some(Value::Array(members)) = schema.get("anyOf") {
        let not_null: Vec<&Value> = members.iter().filter(|m| m.get("type") != Some(&Value::from("null"))).collect();
        return match not_null.as_slice() {
            [one] if not_null.len() < members.len() => Ty::Nullable(Box::new(ty(one))),
            _ => Ty::Any,
        };
    }
    match schema.get("type") {
        Some(Value::Array(types)) => {
            let one = types.iter().find(|t| *t != "null").cloned().unwrap_or(Value::Null);
            let mut inner = schema.clone();
            inner["type"] = one;
            let inner = ty(&inner);
            if types.iter().any(|t| t == "null") { Ty::Nullable(Box::new(inner)) } else { inner }
        }
        Some(Value::String(t)) => match t.as_str() {
            "boolean" => Ty::Bool,
            "integer" => Ty::Int(schema.get("format").and_then(Value::as_str).unwrap_or("int64").to_string()),
            "number" => Ty::Number,
            "string" => Ty::String,
            "array" => Ty::Array(Box::new(schema.get("items").map_or(Ty::Any, ty))),
            "object" => Ty::Map(Box::new(schema.get("additionalProperties").map_or(Ty::Any, ty))),
            _ => Ty::Any,
        },
        _ => Ty::Any,
    }
}

fn ref_name(reference: &str) -> String {
    reference.rsplit('/').next().unwrap_or(reference).to_string()
}

fn doc(schema: &Value) -> Option<String> {
    schema.get("description").and_then(Value::as_str).map(str::to_string)
}

/// `per_s_10s` as `PerS10s`.
pub(crate) fn pascal(name: &str) -> String {
    name.split('_')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map(|c| c.to_uppercase().chain(chars).collect::<String>()).unwrap_or_default()
        })
        .collect()
}

/// The generated files, by path from the repository's root.
pub fn kit_files(snapshot: &Value, decision: &Value) -> Vec<(&'static str, String)> {
    let defs = contract(snapshot, decision);
    vec![
        ("policies-wasm/python/modelless_policy/types.py", python::write(&defs)),
        ("policies-wasm/typescript/kit/types.ts", typescript::write(&defs)),
        ("policies-wasm/go/policy/types.go", go::write(&defs)),
        ("policies-wasm/zig/kit/types.zig", zig::write(&defs)),
    ]
}

/// The line every generated file starts with (in the language's comment).
pub(crate) const GENERATED: &str = "Generated from policy-abi/schema/ by modelless-policy-abi (kits); do not edit. MODELLESS_WRITE_SCHEMA=1 \
     cargo test -p modelless-policy-abi --features schema writes it anew.";

/// `text` as comment lines starting with `prefix`, indented by `indent`.
pub(crate) fn comment(text: &str, indent: &str, prefix: &str) -> String {
    text.lines()
        .map(|line| if line.is_empty() { format!("{indent}{prefix}\n") } else { format!("{indent}{prefix} {line}\n") })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nullable_references_maps_and_enums_are_read_from_the_schema() {
        let snapshot: Value = serde_json::from_str(include_str!("../../schema/snapshot.schema.json")).unwrap();
        let decision: Value = serde_json::from_str(include_str!("../../schema/decision.schema.json")).unwrap();
        let defs = contract(&snapshot, &decision);
        let find = |name: &str| defs.iter().find(|d| d.name == name).unwrap_or_else(|| panic!("{name} missing"));
        let Shape::Object(fields) = &find("VariantSnapshot").shape else { panic!("an object") };
        let profile = fields.iter().find(|f| f.name == "profile").unwrap();
        assert_eq!(profile.ty, Ty::Nullable(Box::new(Ty::Ref("VariantCost".into()))));
        assert!(matches!(&find("VariantState").shape, Shape::StringEnum(v) if v.contains(&"ready".to_string())));
        let Shape::Object(fields) = &find("TaskDecision").shape else { panic!("an object") };
        let standby = fields.iter().find(|f| f.name == "standby").unwrap();
        assert_eq!((standby.ty.clone(), standby.required), (Ty::Map(Box::new(Ty::Int("uint32".into()))), false));
        assert!(fields.iter().find(|f| f.name == "task").unwrap().required);
        assert_eq!(find("PolicyOutput").shape, Shape::Union(vec!["PolicyError".into(), "Decision".into()]));
    }
}
