// A plain-text view of one terminal session: replays the scrollback, then
// follows live bytes and acknowledges them (flow control). Bytes go straight
// into the DOM, never into React state. Shown where the xterm.js view is not
// available; escape sequences are stripped, everything is shown as text.
import { useEffect, useRef, useState, type KeyboardEvent } from 'react';
import type { ErrorInfo } from '../../common/domain.js';
import { useController } from '../state/context.js';
import { toErrorInfo } from '../state/store.js';
import { ErrorBox } from './ErrorBox.js';

const MAX_CHARS = 512 * 1024;
// CSI, OSC (ended by BEL or ST), other two-byte escapes, and stray control characters except \n \t.
const ANSI = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|[\x00-\x08\x0b-\x1f\x7f]/g;

export function stripAnsi(text: string): string {
  return text.replace(/\r\n/g, '\n').replace(ANSI, '');
}

function base64ToBytes(b64: string): Uint8Array {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function PlainTerminal({ sessionId, interactive }: { sessionId: string; interactive: boolean }) {
  const controller = useController();
  const pre = useRef<HTMLPreElement>(null);
  const [error, setError] = useState<ErrorInfo>();

  useEffect(() => {
    const bridge = controller.bridge;
    const decoder = new TextDecoder();
    let attached = false;
    let disposed = false;
    const append = (bytes: Uint8Array) => {
      const el = pre.current;
      if (!el) return;
      const stick = el.scrollTop + el.clientHeight >= el.scrollHeight - 4;
      let text = (el.textContent ?? '') + stripAnsi(decoder.decode(bytes, { stream: true }));
      if (text.length > MAX_CHARS) text = text.slice(text.length - MAX_CHARS);
      el.textContent = text;
      if (stick) el.scrollTop = el.scrollHeight;
    };
    const off = bridge.onTerminalData((e) => {
      if (e.sessionId !== sessionId || disposed) return;
      // Bytes that arrive before the attach answer are part of its scrollback.
      if (attached) append(e.data);
      void bridge.call('terminal.ack', { sessionId, bytes: e.data.byteLength }).catch(() => {});
    });
    if (pre.current) pre.current.textContent = '';
    bridge
      .call('terminal.attach', { sessionId })
      .then(({ scrollback }) => {
        if (disposed) return;
        append(base64ToBytes(scrollback));
        attached = true;
      })
      .catch((err) => !disposed && setError(toErrorInfo(err)));
    return () => {
      disposed = true;
      off();
    };
  }, [controller, sessionId]);

  const onKey = (e: KeyboardEvent<HTMLInputElement>) => {
    if (e.key !== 'Enter') return;
    const line = e.currentTarget.value;
    e.currentTarget.value = '';
    void controller.bridge.call('terminal.write', { sessionId, data: line + '\r' }).catch((err) => setError(toErrorInfo(err)));
  };

  return (
    <div className="plain-terminal" data-testid="terminal-pane" data-session-id={sessionId}>
      <pre ref={pre} className="terminal-text" data-testid="terminal-output" />
      {interactive ? (
        <input
          type="text"
          className="terminal-input"
          data-testid="terminal-input"
          placeholder="Type a command and press Enter"
          spellCheck={false}
          onKeyDown={onKey}
        />
      ) : null}
      {error ? <ErrorBox testId="terminal-error" error={error} /> : null}
    </div>
  );
}
