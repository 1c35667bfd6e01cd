// The terminal modes a full-screen program in the sandbox switched on, read
// from what it printed, so that an attach that ends without the program's own
// cleanup (the agent killed, the app gone) can switch them off again: the
// alternate screen, a hidden cursor, mouse and focus reporting, bracketed
// paste, application cursor keys and keypad, kitty keyboard flags and
// modifyOtherKeys. Only what was switched on is undone: leaving an alternate
// screen that was never entered would move the cursor (DECRC).

/** DEC private modes whose "set" (h) a program must undo with "reset" (l). */
const SET_MODES = new Set([1, 47, 1000, 1002, 1003, 1004, 1005, 1006, 1015, 1047, 1049, 2004]);
/** Longest sequence kept across a chunk boundary. */
const TAIL = 32;
// CSI ? Pm h|l, CSI > flags u (kitty push), CSI < n u (kitty pop), CSI > 4 ; n m (modifyOtherKeys), ESC = / ESC >.
const SEQUENCE = /\x1b\[\?([0-9;]+)([hl])|\x1b\[>([0-9]*)u|\x1b\[<([0-9]*)u|\x1b\[>4(?:;([0-9]+))?m|\x1b([=>])/g;

export class TerminalModes {
  private readonly on = new Set<number>();
  private cursorHidden = false;
  private kittyPushes = 0;
  private otherKeys = false;
  private keypad = false;
  private tail = '';

  feed(chunk: Buffer | string): void {
    const text = this.tail + (typeof chunk === 'string' ? chunk : chunk.toString('latin1'));
    let end = 0;
    for (const m of text.matchAll(SEQUENCE)) {
      end = m.index + m[0].length;
      if (m[1] !== undefined) {
        const set = m[2] === 'h';
        for (const n of m[1].split(';').map(Number)) {
          if (n === 25) this.cursorHidden = !set;
          else if (SET_MODES.has(n)) set ? this.on.add(n) : this.on.delete(n);
        }
      } else if (m[3] !== undefined) this.kittyPushes++;
      else if (m[4] !== undefined) this.kittyPushes = Math.max(0, this.kittyPushes - Math.max(1, Number(m[4] || 1)));
      else if (m[0].startsWith('\x1b[>4')) this.otherKeys = Number(m[5] ?? 0) > 0;
      else if (m[6] !== undefined) this.keypad = m[6] === '=';
    }
    // A sequence cut at the chunk's end is read with the next chunk; what was matched is not read twice.
    const rest = text.slice(end);
    const lastEsc = rest.lastIndexOf('\x1b');
    this.tail = lastEsc >= 0 && rest.length - lastEsc <= TAIL ? rest.slice(lastEsc) : '';
  }

  /** What switches off every mode still on; empty when the program left none on. */
  resetSequence(): string {
    let out = '';
    // The alternate screen first: the rest then applies to the screen the user returns to.
    for (const n of [1049, 1047, 47]) if (this.on.has(n)) out += `\x1b[?${n}l`;
    for (const n of [...this.on].filter((n) => n !== 1049 && n !== 1047 && n !== 47).sort((a, b) => a - b)) out += `\x1b[?${n}l`;
    if (this.cursorHidden) out += '\x1b[?25h';
    if (this.kittyPushes > 0) out += `\x1b[<${this.kittyPushes}u`;
    if (this.otherKeys) out += '\x1b[>4m';
    if (this.keypad) out += '\x1b>';
    return out;
  }
}
