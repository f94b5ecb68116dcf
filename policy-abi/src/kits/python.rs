//! Python: a TypedDict per object (fields that may be left out are `NotRequired`), a
//! `Literal` per string enum, a `Union` per union. JSON decodes straight into them.

use super::{Def, GENERATED, Shape, Ty, comment};

fn ty(ty: &Ty) -> String {
    match ty {
        Ty::Bool => "bool".into(),
        Ty::Int(_) => "int".into(),
        Ty::Number => "float".into(),
        Ty::String => "str".into(),
        Ty::Ref(name) => name.clone(),
        Ty::Array(item) => format!("List[{}]", self::ty(item)),
        Ty::Map(value) => format!("Dict[str, {}]", self::ty(value)),
        Ty::Nullable(inner) => format!("Optional[{}]", self::ty(inner)),
        Ty::Any => "Any".into(),
    }
}

pub(super) fn write(defs: &[Def]) -> String {
    let mut out = format!(
        "\"\"\"{GENERATED}\n\nThe snapshot a policy decides on and the decision it answers, as TypedDicts.\n\"\"\"\n\n"
    );
    out += "from __future__ import annotations\n\nfrom typing import Any, Dict, List, Literal, NotRequired, Optional, TypedDict, Union\n";
    // Aliases are evaluated where they stand: enums first, unions last.
    for def in defs {
        if let Shape::StringEnum(values) = &def.shape {
            out += "\n";
            out += &comment(def.doc.as_deref().unwrap_or_default(), "", "#");
            let values: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
            out += &format!("{} = Literal[{}]\n", def.name, values.join(", "));
        }
    }
    for def in defs {
        let Shape::Object(fields) = &def.shape else { continue };
        out += &format!("\n\nclass {}(TypedDict):\n", def.name);
        if let Some(doc) = &def.doc {
            out += &format!("    \"\"\"{}\"\"\"\n", doc.replace('\n', "\n    "));
        }
        if fields.is_empty() {
            out += "    pass\n";
        }
        for field in fields {
            out += "\n";
            out += &comment(field.doc.as_deref().unwrap_or_default(), "    ", "#");
            let t = ty(&field.ty);
            let t = if field.required { t } else { format!("NotRequired[{t}]") };
            out += &format!("    {}: {t}\n", field.name);
        }
    }
    for def in defs {
        if let Shape::Union(members) = &def.shape {
            out += "\n\n";
            out += &comment(def.doc.as_deref().unwrap_or_default(), "", "#");
            out += &format!("{} = Union[{}]\n", def.name, members.join(", "));
        }
    }
    out
}
