import { useEffect, useState } from 'react';
import { getBlob, plainWords } from '../api';

/** The transparency log's latest signed checkpoint (C2SP tlog-checkpoint text) and its verifier key. */
export function LogCheckpoint() {
  const [checkpoint, setCheckpoint] = useState<string>();
  const [key, setKey] = useState<string>();
  const [problem, setProblem] = useState<string>();
  useEffect(() => {
    void (async () => {
      try {
        setCheckpoint(await (await getBlob('/v1/log/checkpoint')).text());
        setKey(await (await getBlob('/v1/log/key')).text());
      } catch (error) {
        setProblem(plainWords(error));
      }
    })();
  }, []);
  const [origin, size, root] = checkpoint?.split('\n') ?? [];
  return (
    <section aria-labelledby="log-title">
      <h1 id="log-title">Verifiable log</h1>
      {problem && (
        <p role="alert" className="error">
          {problem}
        </p>
      )}
      {checkpoint && (
        <dl>
          <dt>Origin</dt>
          <dd>{origin}</dd>
          <dt>Tree size</dt>
          <dd data-testid="tree-size">{size}</dd>
          <dt>Root hash</dt>
          <dd>
            <code>{root}</code>
          </dd>
        </dl>
      )}
      <h2>Signed checkpoint</h2>
      <pre className="wrap" tabIndex={0}>
        {checkpoint ?? '…'}
      </pre>
      <h2>Verifier key</h2>
      <pre className="wrap" tabIndex={0}>
        {key ?? '…'}
      </pre>
    </section>
  );
}
