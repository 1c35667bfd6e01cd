// What the user types: commands, their options, exec's command after `--`
// kept verbatim, and wrong usage named.
import { describe, expect, it } from 'vitest';
import { helpText, parseCommandLine } from '../../../main/cli/args.js';
import { COMMANDS } from '../../../main/cli/commands.js';

describe('factory command line', () => {
  it('finds the command after global options that take values', () => {
    const p = parseCommandLine(['--data-dir', '/some/dir', '--json', 'run', '/repo', 'fix it', '--wait', '--agent', 'command']);
    expect(p.name).toBe('run');
    expect(p.values).toMatchObject({ 'data-dir': '/some/dir', json: true, wait: true, agent: 'command' });
    expect(p.positionals).toEqual(['/repo', 'fix it']);
  });

  it('keeps the words after -- for exec, options and dashes included', () => {
    const p = parseCommandLine(['exec', 'abc', '--timeout', '5', '--', 'sh', '-c', 'echo --json; exit 3', '--help']);
    expect(p.positionals).toEqual(['abc']);
    expect(p.values.timeout).toBe('5');
    expect(p.values.help).toBeUndefined();
    expect(p.rest).toEqual(['sh', '-c', 'echo --json; exit 3', '--help']);
  });

  it('names an unknown command, an unknown option and a wrong argument count', () => {
    expect(() => parseCommandLine(['frobnicate'])).toThrow(/unknown command "frobnicate"/);
    expect(() => parseCommandLine(['ls', '--bogus'])).toThrow(/ls: Unknown option '--bogus'/);
    expect(() => parseCommandLine(['show'])).toThrow(/show: expected 1 argument, got 0\. Usage: factory show <task>/);
    expect(() => parseCommandLine(['run', 'only-repo'])).toThrow(/expected 2 arguments, got 1/);
  });

  it('gives help for every command without needing its arguments', () => {
    for (const [name, command] of Object.entries(COMMANDS)) {
      const p = parseCommandLine([name, '--help']);
      expect(p.values.help).toBe(true);
      const text = helpText(command);
      expect(text).toContain(`Usage: ${command.usage}`);
      expect(text).toContain('--json');
    }
    expect(helpText()).toMatch(/Commands:[\s\S]*exec[\s\S]*leakcheck/);
  });
});
