//! OpenCode has no command hooks; troupe installs a small bridge plugin that
//! pipes each tool call to `troupe hook opencode PreToolUse` and throws (which
//! blocks the tool) unless troupe answers allow. It fails closed too: no answer,
//! a bad answer or a non-zero exit all block.

use super::files::Plan;
use super::manifest::Manifest;
use super::{InstallError, InstallOptions};

const PLUGIN: &str = ".opencode/plugin/troupe-gates.js";

pub(super) fn plugin_source(troupe: &str) -> String {
    let troupe = serde_json::to_string(troupe).expect("a string serializes");
    format!(
        r#"// troupe's gates for OpenCode: every tool call is checked by `troupe hook opencode …`.
// Installed by `troupe init --opencode`; removed by `troupe init --uninstall-hooks`.
import {{ spawnSync }} from "node:child_process";

// The troupe that started this teammate (`TROUPE_BIN`), else the one that
// installed this file: a project's copy may name a binary that has moved.
const TROUPE = process.env.TROUPE_BIN || {troupe};
// One bridge per OpenCode process: a project's copy (`troupe init --opencode`)
// and the one troupe adds to each teammate's run both load, and each would
// ask troupe about every tool call.
const LOADED = Symbol.for("troupe.gates.loaded");

function ask(event, payload) {{
  const run = spawnSync(TROUPE, ["hook", "opencode", event], {{
    input: JSON.stringify({{ hook_event_name: event, ...payload }}),
    encoding: "utf8",
    timeout: 600000,
  }});
  let answer = null;
  try {{
    answer = JSON.parse(run.stdout || "null");
  }} catch {{}}
  if (run.error || run.status !== 0 || !answer || answer.decision !== "allow") {{
    const reason = (answer && answer.reason) || run.stderr || (run.error && String(run.error)) || "troupe hook gave no answer";
    return {{ allowed: false, reason }};
  }}
  return {{ allowed: true }};
}}

export const TroupeGates = async ({{ directory }}) => {{
  if (globalThis[LOADED]) return {{}};
  globalThis[LOADED] = true;
  const argsByCall = new Map();
  return {{
    "tool.execute.before": async (input, output) => {{
      argsByCall.set(input.callID, output.args);
      const verdict = ask("PreToolUse", {{
        tool_name: input.tool,
        session_id: input.sessionID,
        call_id: input.callID,
        cwd: directory,
        tool_input: output.args,
      }});
      if (!verdict.allowed) throw new Error(verdict.reason);
    }},
    "tool.execute.after": async (input, output) => {{
      const args = argsByCall.get(input.callID);
      argsByCall.delete(input.callID);
      // Records skills invoked (`troupe skill use`) and runs the post-run check;
      // the tool already ran, so a refusal (writes outside ownership, the
      // sandbox's refusals) is added to what the model reads of its output.
      const verdict = ask("PostToolUse", {{
        tool_name: input.tool,
        session_id: input.sessionID,
        call_id: input.callID,
        cwd: directory,
        tool_input: args ?? {{}},
        tool_response: output && typeof output.output === "string" ? {{ output: output.output }} : {{}},
      }});
      if (!verdict.allowed && output) output.output = `${{output.output ?? ""}}\n\n${{verdict.reason}}`;
    }},
  }};
}};
"#
    )
}

pub fn install(plan: &mut Plan, manifest: &mut Manifest, options: &InstallOptions) -> Result<(), InstallError> {
    plan.create(manifest, PLUGIN, plugin_source(&options.troupe.to_string_lossy()))
}

#[cfg(test)]
mod tests {
    use super::plugin_source;

    /// Two copies of the bridge in one OpenCode process (a project's and a
    /// run's) register the hooks once, and ask the troupe in `TROUPE_BIN`,
    /// not the one either file names. Run by node, as OpenCode's bun would.
    #[test]
    fn two_copies_in_one_process_ask_troupe_once_through_troupe_bin() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let calls = d.join("calls");
        let troupe = d.join("troupe");
        let answer = r#"{"decision":"allow"}"#;
        // It reads the payload as troupe does: a script that exits before
        // node has written it fails node's spawnSync with EPIPE.
        std::fs::write(
            &troupe,
            format!("#!/bin/sh\ncat >/dev/null\necho \"$*\" >> '{}'\necho '{answer}'\n", calls.display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&troupe, std::fs::Permissions::from_mode(0o755)).unwrap();
        for copy in ["project.mjs", "run.mjs"] {
            std::fs::write(d.join(copy), plugin_source("/moved/away/troupe")).unwrap();
        }
        let main = "const hooks = [];\n\
            for (const f of ['./project.mjs', './run.mjs']) hooks.push(await (await import(f)).TroupeGates({ directory: '/' }));\n\
            console.log(JSON.stringify(hooks.map((h) => Object.keys(h))));\n\
            for (const h of hooks) if (h['tool.execute.before']) await h['tool.execute.before']({ tool: 'read', sessionID: 's', callID: 'c' }, { args: {} });\n";
        std::fs::write(d.join("main.mjs"), main).unwrap();
        let out = std::process::Command::new("node").arg("main.mjs").current_dir(d).env("TROUPE_BIN", &troupe).output();
        let out = out.expect("node runs the bridge as OpenCode would (scripts/install-peers needs it too)");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), r#"[["tool.execute.before","tool.execute.after"],[]]"#);
        assert_eq!(
            std::fs::read_to_string(&calls).unwrap(),
            "hook opencode PreToolUse\n",
            "asked once, through TROUPE_BIN"
        );
    }
}
