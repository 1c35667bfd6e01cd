// The app's one icon set (renderer/components/icons.tsx): every status a stage,
// setup, way or check can have gets an icon of its own, hidden from assistive
// technology (the words beside it say the same), and an unknown status still
// draws one rather than nothing.
import { cleanup, render } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { ActionIcon, StatusIcon } from '../../renderer/components/icons.js';

afterEach(cleanup);

const STATUSES = ['pending', 'running', 'passed', 'failed', 'skipped', 'cancelled', 'interrupted'];

describe('the icon set', () => {
  it('draws a distinct, hidden icon for each status', () => {
    const drawn = STATUSES.map((status) => {
      const { container } = render(<StatusIcon status={status} />);
      const svg = container.querySelector('svg')!;
      expect(svg.getAttribute('aria-hidden')).toBe('true');
      expect(svg.getAttribute('focusable')).toBe('false');
      expect(svg.classList.contains(`status-icon-${status}`)).toBe(true);
      return svg.innerHTML;
    });
    expect(new Set(drawn).size).toBe(STATUSES.length);
  });

  it('draws the pending circle for a status it does not know', () => {
    const unknown = render(<StatusIcon status="something-new" />).container.querySelector('svg')!.innerHTML;
    cleanup();
    expect(unknown).toBe(render(<StatusIcon status="pending" />).container.querySelector('svg')!.innerHTML);
  });

  it('gives a button an icon that adds nothing to its name', () => {
    const { getByRole } = render(
      <button type="button">
        <ActionIcon action="approve" />
        Approve
      </button>,
    );
    expect(getByRole('button', { name: 'Approve' })).toBeTruthy();
  });
});
