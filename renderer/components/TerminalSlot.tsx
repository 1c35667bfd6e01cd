// The one place that decides how a terminal session is drawn: the xterm.js view
// from renderer/terminal, talking to the host through the app's bridge.
import { TerminalView } from '../terminal/index.js';
import { useController } from '../state/context.js';

export function TerminalSlot({ sessionId, interactive, onLeave }: { sessionId: string; interactive: boolean; onLeave?: () => void }) {
  const controller = useController();
  return (
    <TerminalView key={sessionId} sessionId={sessionId} transport={controller.bridge} interactive={interactive} autoFocus={interactive} onLeave={onLeave} />
  );
}
