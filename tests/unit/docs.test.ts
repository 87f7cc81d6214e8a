// The docs and the code name the same things. README.md and docs/*.md are read as text; the code
// is read as source (no build needed):
//   commands  the `case 'NAME':` labels of the switch in src-main/cli/main.ts
//   flags     per command, the files in COMMAND_SOURCES below (a `file#function` entry reads that
//             function only): every parseArgs option-table entry (`name: { type: 'string' }` or
//             `'name': { type: 'boolean' }`) and every flag compared by hand (`=== '--name'`);
//             `help` is left out (every command takes it)
//   scripts   package.json's "scripts"
//   methods   the keys of API_METHODS (common/api/methods.ts)
// Checked both ways:
//   - every `npm run X`, `npm start` and `npm test` the docs write is a script, every
//     `shardwise CMD --flag` they write inside code (inline code or a code block, up to a `#`
//     comment) is a command and one of its flags, and every `devices.x` / `runs.x` / `peers.x`
//     in inline code is an API method;
//   - every command has a section `## shardwise CMD` in docs/cli.md, and every one of its flags a
//     row in that section's table starting `| \`--flag`; every script is named somewhere in the
//     docs as `npm run X`; every API method has a row in docs/api.md.
// And every relative link in them reaches a file, and a heading of it where it names one.
// A failure lists each problem on one line saying what to add where.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { API_METHODS } from '../../common/api/methods.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const read = (rel: string) => readFileSync(path.join(root, rel), 'utf8');

/** Where each command's flags are defined: a file, or `file#function` for one function of it. A new command needs an entry. */
const COMMAND_SOURCES: Record<string, string[]> = {
  train: ['src-main/cli/train-flags.ts'],
  devices: ['src-main/cli/devices.ts'],
  profile: ['src-main/cli/profile.ts'],
  plan: ['src-main/cli/plan.ts'],
  report: ['src-main/cli/report.ts'],
  serve: ['src-main/cli/serve.ts'],
  agent: ['workers/agent/main.ts'],
  peers: ['src-main/cli/peers.ts#peersCommand'],
  pair: ['src-main/cli/peers.ts#pairCommand'],
  peer: ['src-main/cli/peers.ts#peerCommand'],
  eval: ['workers/cli/tools.ts#evalCommand'],
  sample: ['workers/cli/tools.ts#sampleCommand'],
  export: ['workers/cli/tools.ts#exportCommand', 'workers/export/torchrun/command.ts'],
};

const CLI_DOC = 'docs/cli.md';
const API_DOC = 'docs/api.md';

/** the commands main.ts dispatches on */
function cliCommands(): string[] {
  const main = read('src-main/cli/main.ts');
  const body = main.slice(main.indexOf('switch (command)'));
  return [...new Set([...body.matchAll(/case '([a-z][\w-]*)':/g)].map((m) => m[1]!))].filter((c) => c !== 'help');
}

/** the text of a `file#function` entry: from the function's declaration to the next top-level declaration */
function sourceText(entry: string): string {
  const [file, fn] = entry.split('#') as [string, string | undefined];
  const text = read(file);
  if (!fn) return text;
  const start = text.search(new RegExp(`^(?:export )?(?:async )?function ${fn}\\b`, 'm'));
  if (start < 0) throw new Error(`tests/unit/docs.test.ts: COMMAND_SOURCES names ${entry}, but ${file} has no function ${fn}`);
  const rest = text.slice(start + 1);
  const end = rest.search(/^(?:export |async |function |const |class |interface |type )/m);
  return end < 0 ? text.slice(start) : text.slice(start, start + 1 + end);
}

/** the flags a command's sources define */
function flagsOf(command: string): Set<string> {
  const flags = new Set<string>();
  for (const entry of COMMAND_SOURCES[command] ?? []) {
    const text = sourceText(entry);
    for (const m of text.matchAll(/(?:^|[{,])\s*'?([a-z][a-z0-9-]*)'?\s*:\s*\{\s*type:\s*'(?:string|boolean)'/gm)) flags.add(m[1]!);
    for (const m of text.matchAll(/===\s*'--([a-z][a-z0-9-]*)'/g)) flags.add(m[1]!);
  }
  flags.delete('help');
  return flags;
}

interface Doc {
  file: string;
  text: string;
  /** the code in it, with its line: inline code spans, and code-block lines up to a `#` comment */
  code: { line: number; text: string }[];
}

function docs(): Doc[] {
  const files = [
    'README.md',
    ...readdirSync(path.join(root, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];
  return files.sort().map((file) => {
    const text = read(file);
    const code: Doc['code'] = [];
    let fenced = false;
    text.split('\n').forEach((l, i) => {
      if (/^\s*```/.test(l)) fenced = !fenced;
      else if (fenced) code.push({ line: i + 1, text: l.replace(/(^|\s)#.*$/, '') });
      else for (const m of l.replace(/\\\|/g, '|').matchAll(/`([^`]+)`/g)) code.push({ line: i + 1, text: m[1]! });
    });
    return { file, text, code };
  });
}

/** `shardwise CMD --a --b` inside one piece of code: each command with the flags written after it (up to the next command) */
function commandUses(code: string): { command: string; flags: string[] }[] {
  const uses: { command: string; flags: string[] }[] = [];
  const starts = [...code.matchAll(/(?<![\w.:-])shardwise(?:\.js)?[ \t]+([a-z][\w-]*)/g)];
  starts.forEach((m, i) => {
    const tail = code.slice(m.index! + m[0].length, starts[i + 1]?.index ?? code.length);
    uses.push({ command: m[1]!, flags: [...tail.matchAll(/(?<![\w-])--([a-z][a-z0-9-]*)/g)].map((f) => f[1]!) });
  });
  return uses;
}

/** docs/cli.md: each `## shardwise CMD` section's flag rows */
function cliDocEntries(): Map<string, Set<string>> {
  const entries = new Map<string, Set<string>>();
  let current: Set<string> | undefined;
  for (const l of read(CLI_DOC).split('\n')) {
    const h = /^## shardwise ([a-z][\w-]*)\s*$/.exec(l);
    if (h) entries.set(h[1]!, (current = new Set()));
    else if (/^## /.test(l)) current = undefined;
    else if (current) {
      const row = /^\|\s*`--([a-z][a-z0-9-]*)/.exec(l);
      if (row) current.add(row[1]!);
    }
  }
  return entries;
}

it('the commands main.ts dispatches on all have their flag sources listed in this test', () => {
  const missing = cliCommands().filter((c) => !COMMAND_SOURCES[c]);
  expect(missing.map((c) => `tests/unit/docs.test.ts: add COMMAND_SOURCES['${c}'] = [the file(s) holding its parseArgs options]`)).toEqual(
    [],
  );
  const stale = Object.keys(COMMAND_SOURCES).filter((c) => !cliCommands().includes(c));
  expect(stale.map((c) => `tests/unit/docs.test.ts: COMMAND_SOURCES['${c}'] names a command main.ts no longer has; remove it`)).toEqual([]);
});

it('every command and flag the docs write exists, and every command and flag has a docs/cli.md entry', () => {
  const commands = cliCommands();
  const flags = new Map(commands.map((c) => [c, flagsOf(c)]));
  const problems: string[] = [];
  for (const d of docs())
    for (const { line, text } of d.code)
      for (const use of commandUses(text)) {
        if (use.command === 'help') continue;
        const known = flags.get(use.command);
        if (!known) {
          problems.push(`${d.file}:${line}: \`shardwise ${use.command}\` is not a command (main.ts has ${commands.join(', ')})`);
          continue;
        }
        for (const f of use.flags)
          if (f !== 'help' && !known.has(f))
            problems.push(
              `${d.file}:${line}: \`shardwise ${use.command} --${f}\`: ${use.command} has no flag --${f} (its flags, from ${COMMAND_SOURCES[use.command]!.join(', ')}: ${[...known].join(', ')})`,
            );
      }

  const entries = cliDocEntries();
  for (const [command, documented] of entries) {
    const known = flags.get(command);
    if (!known) {
      problems.push(`${CLI_DOC}: section "## shardwise ${command}" documents a command main.ts does not have; remove it`);
      continue;
    }
    for (const f of documented)
      if (!known.has(f))
        problems.push(`${CLI_DOC}: "## shardwise ${command}" has a row for --${f}, which ${command} does not take; remove it`);
  }
  for (const command of commands) {
    const documented = entries.get(command);
    if (!documented) {
      problems.push(`${CLI_DOC}: add a section "## shardwise ${command}" with a table of its flags (| flag | what |)`);
      continue;
    }
    for (const f of flags.get(command)!)
      if (!documented.has(f))
        problems.push(`${CLI_DOC}: add a row "| \`--${f} ...\` | what it does |" to the flags table under "## shardwise ${command}"`);
  }
  expect(problems).toEqual([]);
});

it('every npm script the docs name exists, and every script is named in the docs', () => {
  const scripts = Object.keys((JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts);
  const problems: string[] = [];
  const named = new Set<string>();
  for (const d of docs())
    d.text.split('\n').forEach((l, i) => {
      for (const m of l.matchAll(/\bnpm (?:run (?:--silent\s+)?([a-z][\w:.-]*)|(start|test)\b)/g)) {
        const s = m[1] ?? m[2]!;
        named.add(s);
        if (!scripts.includes(s)) problems.push(`${d.file}:${i + 1}: \`${m[0]}\`: package.json has no script "${s}"`);
      }
    });
  for (const s of scripts)
    if (!named.has(s))
      problems.push(
        s.startsWith('bench:')
          ? `docs/benchmarks.md: add a row "| \`npm run ${s}\` | what it prints |" to the scripts table`
          : `${CLI_DOC}: add a row "| \`npm run ${s}\` | what it does |" to the npm scripts table`,
      );
  expect(problems).toEqual([]);
});

it('every API method the docs name exists, and every method has a row in docs/api.md', () => {
  const methods = Object.keys(API_METHODS);
  const problems: string[] = [];
  for (const d of docs())
    for (const { line, text } of d.code) {
      const m = /^((?:devices|runs|peers)\.[a-z][A-Za-z]*)$/.exec(text.trim());
      if (m && !methods.includes(m[1]!)) problems.push(`${d.file}:${line}: \`${m[1]}\` is not an API method (common/api/methods.ts)`);
    }
  const rows = read(API_DOC)
    .split('\n')
    .filter((l) => l.startsWith('|'))
    .map((l) => l.split('|')[1] ?? '');
  for (const method of methods)
    if (!rows.some((cell) => cell.includes(`\`${method}\``)))
      problems.push(`${API_DOC}: add a row "| \`${method}\` | params | result |" to the methods table`);
  expect(problems).toEqual([]);
});

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');

it('every relative link in the docs reaches a file, and a heading of it where it names one', () => {
  const problems: string[] = [];
  for (const d of docs())
    d.text.split('\n').forEach((l, i) => {
      for (const m of l.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!;
        if (/^[a-z]+:/.test(target)) continue; // http:, https:, mailto:
        const [file, anchor] = target.split('#') as [string, string | undefined];
        const rel = file === '' ? d.file : path.join(path.dirname(d.file), file);
        if (!existsSync(path.join(root, rel))) {
          problems.push(`${d.file}:${i + 1}: link ${target}: ${rel} does not exist`);
          continue;
        }
        if (anchor === undefined || !rel.endsWith('.md')) continue;
        const headings = read(rel)
          .split('\n')
          .filter((h) => /^#{1,6} /.test(h))
          .map((h) => slug(h.replace(/^#+ /, '')));
        if (!headings.includes(anchor))
          problems.push(`${d.file}:${i + 1}: link ${target}: ${rel} has no heading with the anchor #${anchor}`);
      }
    });
  expect(problems).toEqual([]);
});
