//! Zig: a struct per object for `std.json` (fields that may be left out carry their
//! default, nullable ones are optionals defaulting to null), an enum per string enum.
//! Unions are left out: the kit writes a decision, or an error.

use super::{Def, GENERATED, Shape, Ty, comment};

/// Zig's keywords among the contract's names are written `@"…"`.
fn name(name: &str) -> String {
    const KEYWORDS: [&str; 12] =
        ["error", "type", "const", "var", "fn", "test", "union", "struct", "enum", "and", "or", "return"];
    if KEYWORDS.contains(&name) { format!("@\"{name}\"") } else { name.to_string() }
}

fn ty(ty: &Ty) -> String {
    match ty {
        Ty::Bool => "bool".into(),
        Ty::Int(format) => match format.as_str() {
            "uint8" => "u8",
            "uint16" => "u16",
            "uint32" => "u32",
            "uint64" | "uint" => "u64",
            "int32" => "i32",
            _ => "i64",
        }
        .into(),
        Ty::Number => "f64".into(),
        Ty::String => "[]const u8".into(),
        Ty::Ref(name) => name.clone(),
        Ty::Array(item) => format!("[]const {}", self::ty(item)),
        Ty::Map(value) => format!("std.json.ArrayHashMap({})", self::ty(value)),
        Ty::Nullable(inner) => format!("?{}", self::ty(inner)),
        Ty::Any => "std.json.Value".into(),
    }
}

/// The default a field that may be left out takes, where its type has one.
fn default(ty: &Ty) -> Option<&'static str> {
    match ty {
        Ty::Nullable(_) => Some("null"),
        Ty::Bool => Some("false"),
        Ty::Int(_) | Ty::Number => Some("0"),
        Ty::String => Some("\"\""),
        Ty::Array(_) => Some("&.{}"),
        Ty::Map(_) => Some(".{}"),
        Ty::Any => Some(".null"),
        Ty::Ref(_) => None,
    }
}

pub(super) fn write(defs: &[Def]) -> String {
    let mut out = comment(GENERATED, "", "//!");
    out += "//!\n//! The snapshot a policy decides on and the decision it answers, for std.json.\n\n";
    out += "const std = @import(\"std\");\n";
    for def in defs {
        match &def.shape {
            Shape::Object(fields) => {
                out += "\n";
                out += &comment(def.doc.as_deref().unwrap_or_default(), "", "///");
                out += &format!("pub const {} = struct {{\n", def.name);
                for field in fields {
                    out += &comment(field.doc.as_deref().unwrap_or_default(), "    ", "///");
                    let value = if field.required { None } else { default(&field.ty) };
                    let value = value.map_or(String::new(), |v| format!(" = {v}"));
                    out += &format!("    {}: {}{value},\n", name(&field.name), ty(&field.ty));
                }
                out += "};\n";
            }
            Shape::StringEnum(values) => {
                out += "\n";
                out += &comment(def.doc.as_deref().unwrap_or_default(), "", "///");
                let values: Vec<String> = values.iter().map(|v| name(v)).collect();
                out += &format!("pub const {} = enum {{ {} }};\n", def.name, values.join(", "));
            }
            Shape::Union(_) => {}
        }
    }
    out
}
