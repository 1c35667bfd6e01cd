// The "Keyboard shortcuts" list: a button in the header (and Alt+/) opens it
// as a modal dialog; Esc or Close shuts it and the focus goes back to where
// it was. It is made from the same table the shortcuts run on.
import { useEffect, useRef } from 'react';
import { useController, useFactory } from '../state/context.js';
import { keysLabel, keysOf, LOCAL_SHORTCUTS, SHORTCUTS } from '../keyboard/shortcuts.js';

export function ShortcutsHelp() {
  const controller = useController();
  const open = useFactory((s) => !!s.shortcutsOpen);
  const dialog = useRef<HTMLDialogElement>(null);
  const before = useRef<HTMLElement | null>(null);

  useEffect(() => {
    const d = dialog.current;
    if (!d) return;
    if (open && !d.open) {
      before.current = document.activeElement as HTMLElement | null;
      // jsdom has no showModal: the open attribute shows it there.
      if (typeof d.showModal === 'function') d.showModal();
      else d.setAttribute('open', '');
      d.querySelector<HTMLElement>('[data-testid="shortcuts-close-button"]')?.focus();
    } else if (!open && d.open) {
      if (typeof d.close === 'function') d.close();
      else d.removeAttribute('open');
    }
  }, [open]);

  const close = () => {
    controller.store.setState({ shortcutsOpen: false });
    before.current?.focus?.();
  };
  const rows = [...SHORTCUTS.map((s) => ({ keys: s.keys, does: s.does })), ...LOCAL_SHORTCUTS];

  return (
    <>
      <button
        type="button"
        className="nav"
        data-testid="shortcuts-button"
        aria-keyshortcuts={keysOf('shortcuts-help')}
        aria-haspopup="dialog"
        title={`Keyboard shortcuts (${keysLabel(keysOf('shortcuts-help'))})`}
        onClick={() => controller.store.setState({ shortcutsOpen: true })}
      >
        Keyboard shortcuts
      </button>
      <dialog
        ref={dialog}
        className="shortcuts-help"
        aria-label="Keyboard shortcuts"
        data-testid="shortcuts-dialog"
        onCancel={(e) => {
          // Esc: close through the store, so it and the dialog agree.
          e.preventDefault();
          close();
        }}
      >
        {/* Drawn only while open: a closed list is no part of the page. */}
        {open ? (
          <>
            <h2>Keyboard shortcuts</h2>
            <table>
              <thead>
                <tr>
                  <th scope="col">Keys</th>
                  <th scope="col">What they do</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((r) => (
                  <tr key={r.keys} data-testid="shortcut-row">
                    <td>
                      <kbd>{keysLabel(r.keys)}</kbd>
                    </td>
                    <td>{r.does}</td>
                  </tr>
                ))}
              </tbody>
            </table>
            <p className="hint">Shortcuts other than F6 do nothing while you type in a field or a terminal.</p>
            <div className="actions">
              <button type="button" data-testid="shortcuts-close-button" onClick={close}>
                Close
              </button>
            </div>
          </>
        ) : null}
      </dialog>
    </>
  );
}
