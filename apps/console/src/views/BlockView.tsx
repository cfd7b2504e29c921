import Markdown from 'react-markdown';
import { useAbilities } from '../identity';
import { linkTo } from '../router';
import { formatDuration, pretty, textOf, visibleJson } from './format';
import type { Block, Message } from './model';
import { RenderBoundary } from './RenderBoundary';

/** One block, as Cherry Studio would show it; a block that cannot be shown says so, and the rest stays. */
export function BlockView({ block }: { block: Block }) {
  return (
    <RenderBoundary what="block">
      <BlockBody block={block} />
    </RenderBoundary>
  );
}

function BlockBody({ block }: { block: Block }) {
  switch (block.type) {
    case 'main_text':
      return (
        <div className="block main-text" data-block-type="main_text" data-status={block.status}>
          <BlockText text={textOf(block.content)} />
          {block.status === 'streaming' && <span className="streaming">streaming…</span>}
        </div>
      );
    case 'thinking':
      return (
        <details className="block thinking">
          <summary>
            Thinking
            {block.thinking_millsec !== undefined ? ` for ${formatDuration(block.thinking_millsec)}` : ''}
            {block.status === 'streaming' ? ' (still thinking)' : ''}
          </summary>
          <pre className="wrap">{textOf(block.content)}</pre>
        </details>
      );
    case 'tool':
      return <ToolBlock block={block} />;
    case 'citation':
      return <Citations block={block} />;
    case 'image':
      return (
        <figure className="block image">
          {block.url?.startsWith('data:') ? (
            <img src={block.url} alt="an image the model produced" />
          ) : (
            <figcaption>Image {block.url ? <code>{block.url}</code> : '(no URL recorded)'}</figcaption>
          )}
        </figure>
      );
    case 'error':
      return (
        <div className="block error-block" role="note">
          <strong>Error</strong> <pre className="wrap">{pretty(block.error ?? block.content)}</pre>
        </div>
      );
    case 'code':
      return <pre className="block code">{textOf(block.content)}</pre>;
    default:
      return (
        <div className="block other">
          <span className="tag">{block.type}</span>{' '}
          <pre className="wrap">{pretty(block.content ?? block.metadata ?? {})}</pre>
        </div>
      );
  }
}

interface Governance {
  readonly toolCallId?: string;
  readonly status?: string;
  readonly outcome?: string | null;
}

function ToolBlock({ block }: { block: Block }) {
  const { oversee } = useAbilities();
  const governance = block.metadata?.governance as Governance | undefined;
  return (
    <div className="block tool" data-status={block.status}>
      <div className="tool-head">
        <strong>Tool {block.toolName ?? block.toolId}</strong>{' '}
        <span className={`tag ${block.status}`}>{block.status}</span>
        {governance && (
          <span className="tag governance">
            governed: {governance.status}
            {governance.outcome ? ` · ${governance.outcome}` : ''}
          </span>
        )}
        {governance?.toolCallId && oversee && (
          <a {...linkTo(`/tool-calls/${encodeURIComponent(governance.toolCallId)}`)}>trail</a>
        )}
      </div>
      <details>
        <summary>Arguments</summary>
        <pre className="wrap">{visibleJson(block.arguments)}</pre>
      </details>
      {block.content !== undefined && (
        <details open>
          <summary>Result</summary>
          <pre className="wrap">{pretty(block.content)}</pre>
        </details>
      )}
    </div>
  );
}

function Citations({ block }: { block: Block }) {
  const response = block.response as { results?: unknown; source?: unknown } | undefined;
  // Results are listed when each has a title or a URL as text; any other shape is shown as the JSON it is.
  const results = Array.isArray(response?.results) && response.results.every(isSource) ? response.results : [];
  return (
    <div className="block citation">
      <strong>Sources{typeof response?.source === 'string' ? ` (${response.source})` : ''}</strong>
      {results.length > 0 ? (
        <ol>
          {results.map((result, index) => (
            <li key={index}>
              {result.title ?? result.url} {result.url && <code>{result.url}</code>}
            </li>
          ))}
        </ol>
      ) : (
        <pre className="wrap">{pretty(block.response)}</pre>
      )}
    </div>
  );
}

/**
 * Longest text shown as Markdown. The parser takes time that grows with the square of some texts' length (`![x](`
 * repeated: 200 KB held a tab for a minute); a longer text is shown as it is.
 */
const MAX_MARKDOWN_CHARS = 16_000;

function BlockText({ text }: { text: string }) {
  return text.length > MAX_MARKDOWN_CHARS ? <pre className="wrap">{text}</pre> : <Markdown>{text}</Markdown>;
}

function isSource(result: unknown): result is { title?: string; url?: string } {
  if (typeof result !== 'object' || result === null) return false;
  const { title, url } = result as { title?: unknown; url?: unknown };
  const text = (value: unknown) => value === undefined || typeof value === 'string';
  return text(title) && text(url) && (title !== undefined || url !== undefined);
}

/** A message's header: role, model, status, and the time it took. */
export function MessageHead({ message, latencyMs }: { message: Message; latencyMs: number | undefined }) {
  return (
    <div className={`message-head ${message.role}`}>
      <strong>{message.role}</strong>
      {message.model && <span className="model">{message.model}</span>}
      <span className={`tag ${message.status}`}>{message.status}</span>
      {latencyMs !== undefined && <span className="latency">took {formatDuration(latencyMs)}</span>}
      <span className="position">@{message.position}</span>
    </div>
  );
}
