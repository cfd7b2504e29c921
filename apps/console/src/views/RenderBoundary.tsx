import { Component, type ReactNode } from 'react';

/**
 * Keeps a part that fails to render (a recorded value of a shape it did not expect) from taking the rest of the
 * console down with it: the part says it could not be shown, the page and its header stay.
 */
export class RenderBoundary extends Component<{ what: string; children: ReactNode }, { failed: boolean }> {
  state = { failed: false };

  static getDerivedStateFromError() {
    return { failed: true };
  }

  render() {
    if (!this.state.failed) return this.props.children;
    return (
      <div className="block error-block" role="note">
        This {this.props.what} could not be shown.
      </div>
    );
  }
}
