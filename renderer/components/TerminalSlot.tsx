// The one place that decides how a terminal session is drawn.
import { PlainTerminal } from './PlainTerminal.js';

export function TerminalSlot({ sessionId, interactive }: { sessionId: string; interactive: boolean }) {
  return <PlainTerminal key={sessionId} sessionId={sessionId} interactive={interactive} />;
}
