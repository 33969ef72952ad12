"""Embeddings and reranking from Python: Engine.embed / rerank and
llama-cpp-python's Llama(embedding=True).embed / create_embedding, on the
built-in model (with an explicit pooling: it is generative) and on the
random-weight BERT files written by `go run ./internal/embedtest/mkembed`
($KVWARDEN_TEST_EMBED_DIR, set by ctest's embed_models fixture)."""
import math
import os
import unittest

import kvwarden


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def embed_dir(test):
    d = os.environ.get("KVWARDEN_TEST_EMBED_DIR", "")
    if not d or not os.path.exists(os.path.join(d, "bert-rank.gguf")):
        if os.environ.get("CI"):
            test.fail("KVWARDEN_TEST_EMBED_DIR is not set and CI is")
        test.skipTest("KVWARDEN_TEST_EMBED_DIR not set (ctest's embed_models fixture writes it)")
    return d


class TestEngineEmbed(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.eng = kvwarden.Engine(None, kv_type="f32")

    @classmethod
    def tearDownClass(cls):
        cls.eng.close()

    def test_vectors(self):
        vecs = self.eng.embed(["first input", "hello world"], pooling="last")
        self.assertEqual(len(vecs), 2)
        self.assertEqual(len(vecs[0]), self.eng.model_info["n_embd"])
        for v in vecs:
            self.assertAlmostEqual(norm(v), 1.0, places=5)
        # The same vector alone as in a list (bit-identical).
        self.assertEqual(self.eng.embed(["hello world"], pooling="last")[0], vecs[1])
        raw = self.eng.embed(["hello world"], pooling="last", normalize=False)[0]
        self.assertNotAlmostEqual(norm(raw), 1.0, places=3)
        small = self.eng.embed(["hello world"], pooling="mean", dimensions=8)[0]
        self.assertEqual(len(small), 8)
        self.assertAlmostEqual(norm(small), 1.0, places=5)

    def test_per_token(self):
        toks = self.eng.embed_tokens(["first input", "hello world"])
        self.assertEqual(len(toks), 2)
        self.assertEqual(len(toks[1]), len(self.eng.tokenize("hello world")))
        for per in toks:
            for v in per:
                self.assertEqual(len(v), self.eng.model_info["n_embd"])
                self.assertAlmostEqual(norm(v), 1.0, places=5)
        # The last token's vector is what pooling last returns.
        self.assertEqual(toks[1][-1], self.eng.embed(["hello world"], pooling="last")[0])
        raw = self.eng.embed_tokens(["hello world"], normalize=False, dimensions=8)[0]
        self.assertEqual(len(raw[0]), 8)
        with self.assertRaises(kvwarden.InvalidArgumentError) as cm:
            self.eng.embed(["hello"], pooling="none")
        self.assertIn("embed_tokens", str(cm.exception))
        with self.assertRaises(kvwarden.InvalidArgumentError):
            self.eng.embed_tokens(["a", ""])

    def test_errors(self):
        with self.assertRaises(kvwarden.InvalidArgumentError) as cm:
            self.eng.embed(["hello"])  # a generative model: no pooling type
        self.assertIn("pooling", str(cm.exception))
        with self.assertRaises(kvwarden.InvalidArgumentError):
            self.eng.embed(["a", ""], pooling="last")
        with self.assertRaises(kvwarden.InvalidArgumentError):
            self.eng.embed([], pooling="last")
        with self.assertRaises(kvwarden.InvalidArgumentError):
            self.eng.embed(["a"], pooling="max")
        with self.assertRaises(kvwarden.InvalidArgumentError) as cm:
            self.eng.embed(["a"], pooling="last", dimensions=100000)
        self.assertIn("dimensions", str(cm.exception))
        with self.assertRaises(TypeError):
            self.eng.embed("not a list", pooling="last")
        with self.assertRaises(kvwarden.InvalidArgumentError):
            self.eng.rerank("q", ["doc"])  # no classification head


class TestLlamaEmbed(unittest.TestCase):
    def test_llama_cpp_python_shapes(self):
        with kvwarden.Llama(kvwarden.BUILTIN_STORIES, embedding=True, pooling_type=3, verbose=False,
                            n_gpu_layers=0) as llm:
            v = llm.embed("Once upon a time")
            self.assertIsInstance(v, list)
            self.assertIsInstance(v[0], float)
            self.assertEqual(len(v), llm.n_embd())
            vs, n = llm.embed(["Once upon a time", "hello"], normalize=True, return_count=True)
            self.assertEqual(len(vs), 2)
            self.assertAlmostEqual(norm(vs[0]), 1.0, places=5)
            self.assertEqual(n, len(llm.tokenize(b"Once upon a time")) + len(llm.tokenize(b"hello")))
            out = llm.create_embedding(["Once upon a time", "hello"])
            self.assertEqual(out["object"], "list")
            self.assertEqual([d["index"] for d in out["data"]], [0, 1])
            self.assertEqual(out["data"][0]["object"], "embedding")
            self.assertEqual(out["data"][0]["embedding"], vs[0])
            self.assertEqual(out["usage"], {"prompt_tokens": n, "total_tokens": n})

    def test_pooling_none(self):
        # llama-cpp-python's shapes with pooling_type=0: per-token vectors.
        with kvwarden.Llama(kvwarden.BUILTIN_STORIES, embedding=True, pooling_type=0, verbose=False,
                            n_gpu_layers=0) as llm:
            per = llm.embed("Once upon a time")
            self.assertEqual(len(per), len(llm.tokenize(b"Once upon a time")))
            self.assertEqual(len(per[0]), llm.n_embd())
            both = llm.embed(["Once upon a time", "hello"], normalize=True)
            self.assertEqual(len(both), 2)
            self.assertEqual(len(both[0]), len(per))
            self.assertAlmostEqual(norm(both[1][0]), 1.0, places=5)
            out = llm.create_embedding("hello")
            self.assertEqual(out["data"][0]["embedding"], both[1])

    def test_embedding_flag_required(self):
        with kvwarden.Llama(kvwarden.BUILTIN_STORIES, verbose=False, n_gpu_layers=0) as llm:
            with self.assertRaises(RuntimeError):
                llm.embed("hello")
            with self.assertRaises(RuntimeError):
                llm.create_embedding("hello")

    def test_bert(self):
        d = embed_dir(self)
        with kvwarden.Llama(os.path.join(d, "bert-cls.gguf"), embedding=True, verbose=False) as llm:
            v = llm.create_embedding("Hello, world!")["data"][0]["embedding"]
            self.assertEqual(len(v), llm.n_embd())
            self.assertAlmostEqual(norm(v), 1.0, places=5)
        with kvwarden.Llama(os.path.join(d, "bert-rank.gguf"), embedding=True, verbose=False) as llm:
            docs = ["Paris is the capital of France.", "The quick brown fox.", "hello world"]
            res = llm.rerank("capital of france", docs)
            self.assertEqual(sorted(r["index"] for r in res), [0, 1, 2])
            scores = [r["relevance_score"] for r in res]
            self.assertEqual(scores, sorted(scores, reverse=True))
            self.assertEqual(llm.rerank("capital of france", docs, top_n=1), res[:1])
            self.assertEqual(llm.engine.rerank("capital of france", docs)[res[0]["index"]], scores[0])


if __name__ == "__main__":
    unittest.main()
