// This terminal on a session in the app (tty-attach.ts) against a scripted
// client: the attach ends with the session's exit, and with a lost connection
// to the app (an app that quits sends no status for the sessions it ends).
import { describe, expect, it } from 'vitest';
import type { FactoryEvent } from '../../../common/contract.js';
import { FactoryError } from '../../../common/errors.js';
import type { TerminalInfo } from '../../../common/domain.js';
import { Listeners } from '../../../common/listeners.js';
import type { FactoryClient, TerminalChunk } from '../../../main/cli/client.js';
import { attachInteractive } from '../../../main/cli/tty-attach.js';

const session: TerminalInfo = { id: 's1', taskId: 't1', kind: 'shell', title: 'agent: Codex', status: 'live', exitCode: null, cols: 80, rows: 24 };

class ScriptedClient {
  readonly events = new Listeners<FactoryEvent>();
  readonly terminal = new Listeners<TerminalChunk>();
  readonly disconnected = new Listeners<Error>();
  readonly calls: string[] = [];
  attached!: () => void;
  readonly attachedOnce = new Promise<void>((r) => (this.attached = r));

  async call(method: string): Promise<unknown> {
    this.calls.push(method);
    if (method === 'terminal.attach') {
      setTimeout(() => this.attached(), 0);
      return { info: session, scrollback: '' };
    }
    return undefined;
  }
}

const asClient = (c: ScriptedClient) => c as unknown as FactoryClient;

describe('attachInteractive', () => {
  it("ends with the session's exit code", async () => {
    const client = new ScriptedClient();
    const attach = attachInteractive(asClient(client), 's1');
    await client.attachedOnce;
    client.events.emit({ type: 'terminal.status', info: { ...session, status: 'exited', exitCode: 3 } });
    await expect(attach).resolves.toBe(3);
    expect(client.calls).toEqual(['terminal.resize', 'terminal.attach']);
  });

  it('ends with the error when the connection to the app is lost, instead of waiting for a status that never comes', async () => {
    const client = new ScriptedClient();
    const attach = attachInteractive(asClient(client), 's1');
    await client.attachedOnce;
    client.disconnected.emit(new FactoryError('Disconnected', 'the app closed the connection'));
    await expect(attach).rejects.toThrow('the app closed the connection');
    // Nothing of the attach is left listening.
    expect([client.events.size, client.terminal.size, client.disconnected.size]).toEqual([0, 0, 0]);
  });
});
