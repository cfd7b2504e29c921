import { describeDialect } from '../testing/dialect-suite.js';
import {
  OPENAI_RESPONSES_REFUSALS,
  OPENAI_RESPONSES_STREAMS,
  OPENAI_RESPONSES_WHOLE,
} from '../testing/dialect-streams.js';

describeDialect('openai-responses', OPENAI_RESPONSES_STREAMS, OPENAI_RESPONSES_REFUSALS, OPENAI_RESPONSES_WHOLE);
