// A scroll box that draws only the rows in view (plus a margin), each of one
// fixed height: 700,000 patch lines or 200,000 file names cost what a screenful
// costs. The box is focusable, so arrow keys and Page Up/Down scroll it too.
import { observeElementRect, useVirtualizer } from '@tanstack/react-virtual';
import { forwardRef, useImperativeHandle, useRef, type CSSProperties, type ReactElement } from 'react';

export interface VirtualRowsHandle {
  /** Brings a row to the top of the box. */
  scrollToRow(index: number): void;
}

interface Props {
  count: number;
  rowHeight: number;
  /** The box's height when the rows need more (the box shrinks to fit fewer). */
  maxHeight: number;
  /** The widest row in characters of the box's font, so the box scrolls sideways to it. */
  widthCh?: number;
  className: string;
  testId: string;
  label: string;
  /** One row: spread `style` (its place) on the returned element and give it the key. */
  row: (index: number, style: CSSProperties) => ReactElement;
}

const OVERSCAN = 20;

export const VirtualRows = forwardRef<VirtualRowsHandle, Props>(function VirtualRows(props, ref) {
  const { count, rowHeight, maxHeight, widthCh, className, testId, label, row } = props;
  const box = useRef<HTMLDivElement>(null);
  const height = Math.min(count * rowHeight, maxHeight);
  const heightNow = useRef(height);
  heightNow.current = height;
  const virtualizer = useVirtualizer({
    count,
    getScrollElement: () => box.current,
    estimateSize: () => rowHeight,
    overscan: OVERSCAN,
    // Draw the first screen in the first render, before the box is measured.
    initialRect: { width: 0, height },
    // A box without layout (hidden, or a DOM without a layout engine) measures 0:
    // draw the screenful it is sized for rather than nothing.
    observeElementRect: (instance, cb) => observeElementRect(instance, (rect) => cb(rect.height > 0 ? rect : { ...rect, height: heightNow.current })),
  });
  // Rows have one fixed height, so a row's place is exact; the box clamps at its end.
  useImperativeHandle(ref, () => ({ scrollToRow: (index) => box.current?.scrollTo({ top: index * rowHeight }) }), [rowHeight]);
  const total = virtualizer.getTotalSize();
  return (
    <div
      ref={box}
      className={`vrows ${className}`}
      data-testid={testId}
      data-virtual-scroller=""
      data-rows={count}
      role="region"
      aria-label={label}
      tabIndex={0}
      style={{ height: Math.max(height, rowHeight) }}
    >
      <div className="vrows-sizer" style={{ height: total, width: widthCh ? `calc(${widthCh}ch + 24px)` : undefined }}>
        {virtualizer.getVirtualItems().map((item) =>
          row(item.index, { height: rowHeight, transform: `translateY(${item.start}px)` }),
        )}
      </div>
    </div>
  );
});
