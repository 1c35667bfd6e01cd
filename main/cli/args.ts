// Argument parsing (node:util parseArgs, strict): the command, its options, its
// positionals and, for exec, the words after `--` kept verbatim.
import { parseArgs } from 'node:util';
import { COMMANDS, type Command, type Values } from './commands.js';
import { UsageError } from './output.js';

export const GLOBAL_OPTIONS = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  'data-dir': { type: 'string' },
  'no-start': { type: 'boolean' },
} as const;

export interface Parsed {
  name?: string;
  command?: Command;
  values: Values;
  positionals: string[];
  rest: string[];
}

export function parseCommandLine(argv: string[]): Parsed {
  // The command is the first positional word; the global options (with their values) may come before it.
  const { tokens } = parseArgs({ args: argv, options: GLOBAL_OPTIONS, strict: false, allowPositionals: true, tokens: true });
  const first = tokens.find((t) => t.kind === 'positional' || t.kind === 'option-terminator');
  const name = first?.kind === 'positional' ? first.value : undefined;
  const idx = first?.kind === 'positional' ? first.index : -1;
  const dashes = argv.indexOf('--');
  if (name === undefined) {
    const { values } = parseArgs({ args: dashes >= 0 ? argv.slice(0, dashes) : argv, options: GLOBAL_OPTIONS, strict: true, allowPositionals: false });
    return { values, positionals: [], rest: [] };
  }
  const command = COMMANDS[name];
  if (!command) throw new UsageError(`unknown command ${JSON.stringify(name)}; the commands: ${Object.keys(COMMANDS).join(', ')}`);
  const mine = [...argv.slice(0, idx), ...argv.slice(idx + 1)];
  const cut = mine.indexOf('--');
  const head = cut >= 0 && command.rest ? mine.slice(0, cut) : mine;
  const rest = cut >= 0 && command.rest ? mine.slice(cut + 1) : [];
  let parsed;
  try {
    parsed = parseArgs({ args: head, options: { ...GLOBAL_OPTIONS, ...command.options }, strict: true, allowPositionals: true });
  } catch (err) {
    throw new UsageError(`${name}: ${(err as Error).message}`);
  }
  const values = parsed.values as Values;
  if (!values.help) {
    const [min, max] = command.positionals;
    const n = parsed.positionals.length;
    if (n < min || n > max) throw new UsageError(`${name}: expected ${min === max ? min : `${min} to ${max}`} argument${max === 1 ? '' : 's'}, got ${n}. Usage: ${command.usage}`);
  }
  return { name, command, values, positionals: parsed.positionals, rest };
}

export function helpText(command?: Command): string {
  if (command) {
    const opts = Object.entries(command.options).map(([k, o]) => `  --${k}${o.type === 'string' ? ' VALUE' : ''}`);
    return [`Usage: ${command.usage}`, '', command.summary, '', 'Options:', ...opts, '  --json        machine-readable output on stdout', '  --help        this help', ''].join('\n');
  }
  return [
    'Usage: factory <command> [options]',
    '',
    'Drives Factory in a Box from the terminal: every task gets its own throwaway VM.',
    'Talks to the running app over its socket in the data folder; starts the app in the',
    'background when none runs (--no-start: fail instead).',
    '',
    'Commands:',
    ...Object.entries(COMMANDS).map(([n, c]) => `  ${n.padEnd(10)} ${c.summary}`),
    '',
    'Options for every command: --json, --help, --data-dir DIR (default: FACTORY_DATA_DIR or the user data folder), --no-start',
    'Exit status: 0 on success, 1 on failure, 2 on wrong usage; exec passes the command\'s own status through (125 when exec itself failed).',
    '',
  ].join('\n');
}
