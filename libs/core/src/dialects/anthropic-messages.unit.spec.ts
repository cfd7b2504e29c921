import { describeDialect } from '../testing/dialect-suite.js';
import { ANTHROPIC_REFUSALS, ANTHROPIC_STREAMS, ANTHROPIC_WHOLE } from '../testing/dialect-streams.js';

describeDialect('anthropic', ANTHROPIC_STREAMS, ANTHROPIC_REFUSALS, ANTHROPIC_WHOLE);
