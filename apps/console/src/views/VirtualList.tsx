import { useVirtualizer } from '@tanstack/react-virtual';
import { useEffect, useRef, type ReactNode } from 'react';

/**
 * A long list that renders only what is in view (a 2,000-block session stays fast). Rows are
 * measured as they render; with `followEnd` the list keeps the newest row in view while the
 * reader is at the bottom, and leaves the scroll alone once they scroll up.
 */
export function VirtualList<T>({
  items,
  itemKey,
  render,
  label,
  estimate = 80,
  followEnd = false,
  className = '',
}: {
  items: readonly T[];
  itemKey: (item: T) => string;
  render: (item: T) => ReactNode;
  label: string;
  estimate?: number;
  followEnd?: boolean;
  className?: string;
}) {
  const scroller = useRef<HTMLDivElement>(null);
  const atEnd = useRef(true);
  const virtualizer = useVirtualizer({
    count: items.length,
    getScrollElement: () => scroller.current,
    estimateSize: () => estimate,
    overscan: 6,
    getItemKey: (index) => itemKey(items[index]),
  });
  useEffect(() => {
    if (followEnd && atEnd.current && items.length > 0) virtualizer.scrollToIndex(items.length - 1, { align: 'end' });
  }, [followEnd, items, virtualizer]);
  return (
    <div
      ref={scroller}
      className={`virtual-list ${className}`}
      tabIndex={0}
      role="region"
      aria-label={label}
      onScroll={(event) => {
        const element = event.currentTarget;
        atEnd.current = element.scrollHeight - element.scrollTop - element.clientHeight < 40;
      }}
    >
      <div className="virtual-space" style={{ height: virtualizer.getTotalSize() }}>
        {virtualizer.getVirtualItems().map((row) => (
          <div
            key={row.key}
            data-index={row.index}
            ref={virtualizer.measureElement}
            className="virtual-row"
            style={{ transform: `translateY(${row.start}px)` }}
          >
            {render(items[row.index])}
          </div>
        ))}
      </div>
    </div>
  );
}
