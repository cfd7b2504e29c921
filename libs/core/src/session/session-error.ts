/** A command the session's rules refuse; `field` names the input at fault. */
export class SessionError extends Error {
  constructor(
    readonly code:
      | 'session_not_found'
      | 'session_exists'
      | 'source_not_found'
      | 'message_not_found'
      | 'message_exists'
      | 'parent_not_found'
      | 'not_a_child'
      | 'not_assistant'
      | 'seq_gap'
      | 'seq_conflict'
      | 'not_a_writer'
      | 'invalid_event'
      | 'dialect_conflict'
      | 'invalid_message'
      | 'block_not_found'
      | 'session_full'
      | 'message_full'
      | 'fork_too_deep',
    message: string,
    readonly field?: string,
  ) {
    super(message);
    this.name = 'SessionError';
  }
}
