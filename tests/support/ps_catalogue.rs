//! The PowerShell reference catalogue
//! (tests/fixtures/powershell-reference/catalogue.json, written by
//! scripts/powershell-catalogue.py from Microsoft's reference pages): per
//! cmdlet its module, the Windows Server versions that have it, its
//! parameters (type, aliases) and parameter sets (members, mandatory,
//! position, pipeline input), each page with the repository, commit and
//! path it was read from; the common parameters; the .NET Framework types
//! and members the scripts name. Read by [`super::ps_check`].

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use serde::Deserialize;

/// Where a fact was read.
#[derive(Clone, Debug, Deserialize)]
pub struct Source {
    /// `owner/name` on GitHub.
    pub repo: String,
    /// The commit read.
    pub commit: String,
    /// The file in it.
    pub path: String,
}

/// The whole catalogue.
#[derive(Debug, Deserialize)]
pub struct Catalogue {
    /// The Windows Server versions every command must exist on.
    pub targets: Vec<String>,
    /// about_CommonParameters.
    pub common_parameters: Common,
    /// about_Automatic_Variables and about_Preference_Variables.
    pub automatic_variables: Automatic,
    /// Cmdlets by name.
    pub commands: BTreeMap<String, Command>,
    /// Names asked for that no page documents.
    #[serde(default)]
    pub not_found: Vec<String>,
    /// Script modules the scripts import, by file name.
    #[serde(default)]
    pub modules: BTreeMap<String, Module>,
    /// .NET Framework types (required: a catalogue without them would
    /// leave rule `dotnet` nothing to check).
    pub dotnet: Dotnet,
}

/// The common parameters every cmdlet takes.
#[derive(Debug, Deserialize)]
pub struct Common {
    /// Their names.
    pub names: Vec<String>,
    /// Where they were read.
    pub source: Source,
}

/// The variables PowerShell sets itself.
#[derive(Debug, Deserialize)]
pub struct Automatic {
    /// Their names, without `$`.
    pub names: Vec<String>,
    /// Where they were read.
    pub sources: Vec<Source>,
}

/// A cmdlet.
#[derive(Debug, Deserialize)]
pub struct Command {
    /// Its module.
    pub module: String,
    /// The Windows Server versions whose docset has it.
    pub windows: Vec<String>,
    /// Its aliases (the page's front matter).
    pub aliases: Vec<String>,
    /// Its reference pages, one per distinct content.
    pub pages: Vec<Page>,
}

/// One reference page of a cmdlet.
#[derive(Debug, Deserialize)]
pub struct Page {
    /// The versions it describes.
    pub windows: Vec<String>,
    /// Where it was read.
    pub source: Source,
    /// The same facts read from the other versions' pages.
    #[serde(default)]
    pub also: Vec<Source>,
    /// Parameters by name.
    pub parameters: BTreeMap<String, Parameter>,
    /// Parameter sets by name.
    pub sets: BTreeMap<String, Set>,
}

impl Page {
    /// The file this page's facts were read from for Windows Server `target`.
    pub fn path_for(&self, target: &str) -> &str {
        let docset = format!("winserver{target}-ps/");
        self.also.iter().find(|s| s.path.contains(&docset)).map_or(self.source.path.as_str(), |s| s.path.as_str())
    }
}

/// A parameter.
#[derive(Debug, Deserialize)]
pub struct Parameter {
    /// Its type as the page writes it.
    #[serde(rename = "type")]
    pub ty: String,
    /// Its aliases.
    pub aliases: Vec<String>,
    /// The values it accepts, when the page lists them (an enumeration's
    /// names, a `ValidateSet`).
    #[serde(default)]
    pub values: Vec<String>,
}

impl Parameter {
    /// A switch takes no value after it (`-Force`, not `-Force $true`).
    pub fn is_switch(&self) -> bool {
        self.ty.ends_with("SwitchParameter")
    }
}

/// A parameter set.
#[derive(Debug, Deserialize)]
pub struct Set {
    /// The default set.
    pub default: bool,
    /// Its members.
    pub parameters: BTreeMap<String, Member>,
}

/// A parameter in a set.
#[derive(Debug, Deserialize)]
pub struct Member {
    /// Mandatory in this set.
    pub required: bool,
    /// Its position, if positional.
    pub position: Option<u32>,
    /// Takes pipeline input.
    pub pipeline: bool,
}

/// A script module's functions.
#[derive(Debug, Deserialize)]
pub struct Module {
    /// Where it was read.
    pub source: Source,
    /// Functions by name, with their parameter names.
    pub functions: BTreeMap<String, ModuleFunction>,
}

/// A script module's function.
#[derive(Debug, Deserialize)]
pub struct ModuleFunction {
    /// Its parameters.
    pub parameters: Vec<String>,
}

/// .NET Framework 4.x: the types the scripts name.
#[derive(Debug, Deserialize)]
pub struct Dotnet {
    /// Windows PowerShell 5.1's type accelerators (`[int]`, `[ref]`).
    pub accelerators: BTreeMap<String, String>,
    /// Where they were read.
    pub accelerators_source: Source,
    /// Types by full name.
    pub types: BTreeMap<String, DotnetType>,
    /// Full names asked for that no source declares.
    #[serde(default)]
    pub not_found: Vec<String>,
}

/// A .NET type.
#[derive(Debug, Deserialize)]
pub struct DotnetType {
    /// Where it is declared.
    pub source: Source,
    /// The public members asked for that it declares.
    pub members: Vec<String>,
    /// Members asked for that it does not declare.
    #[serde(default)]
    pub missing: Vec<String>,
}

/// The catalogue, read from its fixture.
pub fn load() -> Catalogue {
    let path = super::fixture("powershell-reference/catalogue.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

impl Catalogue {
    /// The cmdlet named `name` (any case).
    pub fn command(&self, name: &str) -> Option<(&str, &Command)> {
        self.commands.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(n, c)| (n.as_str(), c))
    }

    /// The cmdlet whose alias `name` is.
    pub fn aliased(&self, name: &str) -> Option<&str> {
        self.commands
            .iter()
            .find(|(_, c)| c.aliases.iter().any(|a| a.eq_ignore_ascii_case(name)))
            .map(|(n, _)| n.as_str())
    }

    /// A common parameter's own name, given its name (any case).
    pub fn common(&self, name: &str) -> Option<&str> {
        self.common_parameters.names.iter().find(|n| n.eq_ignore_ascii_case(name)).map(String::as_str)
    }

    /// The function of an imported script module.
    pub fn module_function(&self, name: &str) -> Option<(&str, &ModuleFunction)> {
        self.modules
            .iter()
            .flat_map(|(m, module)| module.functions.iter().map(move |(n, f)| (m, n, f)))
            .find(|(_, n, _)| n.eq_ignore_ascii_case(name))
            .map(|(m, _, f)| (m.as_str(), f))
    }
}
