//! TypeScript: an interface per object (fields that may be left out are optional), a
//! union of string literals per enum, a union type per union. `JSON.parse` gives them.

use super::{Def, GENERATED, Shape, Ty, comment};

fn ty(ty: &Ty) -> String {
    match ty {
        Ty::Bool => "boolean".into(),
        Ty::Int(_) | Ty::Number => "number".into(),
        Ty::String => "string".into(),
        Ty::Ref(name) => name.clone(),
        Ty::Array(item) => match item.as_ref() {
            Ty::Nullable(_) => format!("({})[]", self::ty(item)),
            _ => format!("{}[]", self::ty(item)),
        },
        Ty::Map(value) => format!("Record<string, {}>", self::ty(value)),
        Ty::Nullable(inner) => format!("{} | null", self::ty(inner)),
        Ty::Any => "unknown".into(),
    }
}

fn doc(text: Option<&str>, indent: &str) -> String {
    match text {
        Some(text) => format!("{indent}/**\n{}{indent} */\n", comment(text, indent, " *")),
        None => String::new(),
    }
}

pub(super) fn write(defs: &[Def]) -> String {
    let mut out = comment(GENERATED, "", "//");
    out += "//\n// The snapshot a policy decides on and the decision it answers.\n";
    for def in defs {
        out += "\n";
        out += &doc(def.doc.as_deref(), "");
        match &def.shape {
            Shape::Object(fields) => {
                out += &format!("export interface {} {{\n", def.name);
                for field in fields {
                    out += &doc(field.doc.as_deref(), "  ");
                    let optional = if field.required { "" } else { "?" };
                    out += &format!("  {}{optional}: {};\n", field.name, ty(&field.ty));
                }
                out += "}\n";
            }
            Shape::StringEnum(values) => {
                let values: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
                out += &format!("export type {} = {};\n", def.name, values.join(" | "));
            }
            Shape::Union(members) => out += &format!("export type {} = {};\n", def.name, members.join(" | ")),
        }
    }
    out
}
