// What an attach undoes when the program in the sandbox ended without its own
// cleanup (the agent killed, the app gone): the modes it switched on, read from
// what it printed, and nothing else.
import { describe, expect, it } from 'vitest';
import { TerminalModes } from '../../../main/cli/terminal-modes.js';

const ESC = '\x1b';

describe('TerminalModes', () => {
  it('undoes what a full-screen agent switched on when it was killed mid-screen, the alternate screen first', () => {
    const modes = new TerminalModes();
    // As a TUI starts: alternate screen, cursor hidden, bracketed paste, SGR mouse, focus events, kitty keyboard, keypad.
    modes.feed(`${ESC}[?1049h${ESC}[?25l${ESC}[?2004h${ESC}[?1000;1006h${ESC}[?1004h${ESC}[>1u${ESC}=`);
    modes.feed(`${ESC}[2J${ESC}[H drawing the prompt `);
    expect(modes.resetSequence()).toBe(`${ESC}[?1049l${ESC}[?1000l${ESC}[?1004l${ESC}[?1006l${ESC}[?2004l${ESC}[?25h${ESC}[<1u${ESC}>`);
  });

  it('leaves nothing to undo after a program that cleaned up itself, or a plain shell', () => {
    const tidy = new TerminalModes();
    tidy.feed(`${ESC}[?1049h${ESC}[?25l${ESC}[?2004h${ESC}[>4;2m${ESC}[>1u`);
    tidy.feed(`${ESC}[<u${ESC}[>4m${ESC}[?2004l${ESC}[?25h${ESC}[?1049l`);
    expect(tidy.resetSequence()).toBe('');
    const shell = new TerminalModes();
    shell.feed('$ ls\r\nREADME.md  src\r\n$ exit\r\n');
    // Never "leave the alternate screen" when it was not entered: that would move the cursor (DECRC).
    expect(shell.resetSequence()).toBe('');
  });

  it('reads a sequence cut between two chunks once', () => {
    const modes = new TerminalModes();
    modes.feed(`text ${ESC}[?10`);
    modes.feed(`49h more ${ESC}[?20`);
    modes.feed('04h');
    expect(modes.resetSequence()).toBe(`${ESC}[?1049l${ESC}[?2004l`);
    modes.feed(`${ESC}[?1049l`);
    expect(modes.resetSequence()).toBe(`${ESC}[?2004l`);
  });

  it('undoes modifyOtherKeys and every kitty keyboard push still on', () => {
    const modes = new TerminalModes();
    modes.feed(`${ESC}[>4;2m${ESC}[>1u${ESC}[>3u${ESC}[>1u${ESC}[<u`);
    expect(modes.resetSequence()).toBe(`${ESC}[<2u${ESC}[>4m`);
  });
});
