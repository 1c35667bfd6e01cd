import { createRoot } from 'react-dom/client';
import { StrictMode } from 'react';
import { App } from './App.js';
import { FactoryController } from './state/controller.js';
import { ControllerContext } from './state/context.js';
import { createFactoryStore } from './state/store.js';
import { chooseBridge } from './transport/choose-bridge.js';
import './styles.css';

// A file dropped outside the drop zone must not make the page navigate to it.
for (const type of ['dragover', 'drop'] as const) window.addEventListener(type, (e) => e.preventDefault());

const root = createRoot(document.getElementById('root')!);
const choice = chooseBridge();
if (choice.kind === 'no-token') {
  root.render(
    <div className="app">
      <div className="error-box" role="alert" data-testid="no-token">
        This page needs its access token. Open the full address that <code>npm start</code> printed (it ends with{' '}
        <code>?token=…</code>).
      </div>
    </div>,
  );
} else {
  const controller = new FactoryController(choice.bridge, createFactoryStore());
  controller.start(choice.kind === 'web' ? (l) => choice.bridge.onConnectionState(l) : undefined);
  root.render(
    <StrictMode>
      <ControllerContext.Provider value={controller}>
        <App />
      </ControllerContext.Provider>
    </StrictMode>,
  );
}
