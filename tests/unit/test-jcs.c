/* Unit tests of canonical JSON (src/crypto/jcs.c) against RFC 8785's own examples: the §3.2.2
 * sample, the §3.2.3 sorting sample, the Appendix B number table, plus escaping, ordering by
 * UTF-16 code units, refusals, and the splice used by the audit log. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cordon/receipt.h>

#include "crypto/jcs.h"

static char *canon_ok(const char *text) {
  struct cordon_error *err = NULL;
  char *out = NULL;
  size_t length = 0;
  if (jcs_canonicalize(text, strlen(text), 0, "test", &out, &length, &err) < 0)
    fail_msg("canonicalize(%s): %s", text, err ? err->message : "?");
  assert_int_equal(strlen(out), length);
  return out;
}

static void assert_canon(const char *text, const char *expected) {
  char *out = canon_ok(text);
  assert_string_equal(out, expected);
  /* Canonical output is a fixed point. */
  char *again = canon_ok(out);
  assert_string_equal(again, out);
  free(again);
  free(out);
}

static void assert_canon_fails(const char *text, const char *needle) {
  struct cordon_error *err = NULL;
  char *out = NULL;
  assert_true(jcs_canonicalize(text, strlen(text), 0, "test", &out, NULL, &err) < 0);
  assert_null(out);
  assert_non_null(err);
  if (needle && !strstr(err->message, needle))
    fail_msg("error '%s' does not mention '%s'", err->message, needle);
  cordon_error_free(err);
}

/* RFC 8785 §3.2.2 (and the UTF-8 bytes of §3.2.4). */
static void test_rfc_sample(void **state) {
  (void)state;
  const char *input =
      "{\n"
      "  \"numbers\": [333333333.33333329, 1E30, 4.50,\n"
      "              2e-3, 0.000000000000000000000000001],\n"
      "  \"string\": \"\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\\"\\/\",\n"
      "  \"literals\": [null, true, false]\n"
      "}";
  const char *expected = "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,"
                         "1e+30,4.5,0.002,1e-27],\"string\":\"\xe2\x82\xac$\\u000f\\nA'B\\\"\\\\"
                         "\\\\\\\"/\"}";
  assert_canon(input, expected);
  static const unsigned char bytes[] = {
      0x7b, 0x22, 0x6c, 0x69, 0x74, 0x65, 0x72, 0x61, 0x6c, 0x73, 0x22, 0x3a, 0x5b, 0x6e, 0x75,
      0x6c, 0x6c, 0x2c, 0x74, 0x72, 0x75, 0x65, 0x2c, 0x66, 0x61, 0x6c, 0x73, 0x65, 0x5d, 0x2c,
      0x22, 0x6e, 0x75, 0x6d, 0x62, 0x65, 0x72, 0x73, 0x22, 0x3a, 0x5b, 0x33, 0x33, 0x33, 0x33,
      0x33, 0x33, 0x33, 0x33, 0x33, 0x2e, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x2c, 0x31,
      0x65, 0x2b, 0x33, 0x30, 0x2c, 0x34, 0x2e, 0x35, 0x2c, 0x30, 0x2e, 0x30, 0x30, 0x32, 0x2c,
      0x31, 0x65, 0x2d, 0x32, 0x37, 0x5d, 0x2c, 0x22, 0x73, 0x74, 0x72, 0x69, 0x6e, 0x67, 0x22,
      0x3a, 0x22, 0xe2, 0x82, 0xac, 0x24, 0x5c, 0x75, 0x30, 0x30, 0x30, 0x66, 0x5c, 0x6e, 0x41,
      0x27, 0x42, 0x5c, 0x22, 0x5c, 0x5c, 0x5c, 0x5c, 0x5c, 0x22, 0x2f, 0x22, 0x7d};
  char *out = canon_ok(input);
  assert_int_equal(strlen(out), sizeof(bytes));
  assert_memory_equal(out, bytes, sizeof(bytes));
  free(out);
}

/* RFC 8785 §3.2.3: sorting by UTF-16 code units. */
static void test_rfc_sorting(void **state) {
  (void)state;
  const char *input = "{\n"
                      "  \"\\u20ac\": \"Euro Sign\",\n"
                      "  \"\\r\": \"Carriage Return\",\n"
                      "  \"\\ufb33\": \"Hebrew Letter Dalet With Dagesh\",\n"
                      "  \"1\": \"One\",\n"
                      "  \"\\ud83d\\ude00\": \"Emoji: Grinning Face\",\n"
                      "  \"\\u0080\": \"Control\",\n"
                      "  \"\\u00f6\": \"Latin Small Letter O With Diaeresis\"\n"
                      "}";
  const char *expected = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\xc2\x80\":\"Control\","
                         "\"\xc3\xb6\":\"Latin Small Letter O With Diaeresis\",\"\xe2\x82\xac\":"
                         "\"Euro Sign\",\"\xf0\x9f\x98\x80\":\"Emoji: Grinning Face\","
                         "\"\xef\xac\xb3\":\"Hebrew Letter Dalet With Dagesh\"}";
  assert_canon(input, expected);
}

static double from_bits(uint64_t bits) {
  double d;
  memcpy(&d, &bits, sizeof(d));
  return d;
}

/* A double, by its bits, and the text it must format as. */
struct number_case {
  uint64_t bits;
  const char *expected;
};

/* Fail unless the double with these bits formats as EXPECTED, the length returned matching. */
static void assert_formats_as(const struct number_case *c) {
  char out[40];
  int n = jcs_format_double(from_bits(c->bits), out, sizeof(out));
  if (n < 0 || strcmp(out, c->expected))
    fail_msg("%016llx: got '%s', want '%s'", (unsigned long long)c->bits, n < 0 ? "(error)" : out,
             c->expected);
  assert_int_equal(n, (int)strlen(out));
}

/* RFC 8785 Appendix B. */
static void test_rfc_numbers(void **state) {
  (void)state;
  static const struct number_case table[] = {
      {0x0000000000000000ull, "0"},
      {0x8000000000000000ull, "0"},
      {0x0000000000000001ull, "5e-324"},
      {0x8000000000000001ull, "-5e-324"},
      {0x7fefffffffffffffull, "1.7976931348623157e+308"},
      {0xffefffffffffffffull, "-1.7976931348623157e+308"},
      {0x4340000000000000ull, "9007199254740992"},
      {0xc340000000000000ull, "-9007199254740992"},
      {0x4430000000000000ull, "295147905179352830000"},
      {0x44b52d02c7e14af5ull, "9.999999999999997e+22"},
      {0x44b52d02c7e14af6ull, "1e+23"},
      {0x44b52d02c7e14af7ull, "1.0000000000000001e+23"},
      {0x444b1ae4d6e2ef4eull, "999999999999999700000"},
      {0x444b1ae4d6e2ef4full, "999999999999999900000"},
      {0x444b1ae4d6e2ef50ull, "1e+21"},
      {0x3eb0c6f7a0b5ed8cull, "9.999999999999997e-7"},
      {0x3eb0c6f7a0b5ed8dull, "0.000001"},
      {0x41b3de4355555553ull, "333333333.3333332"},
      {0x41b3de4355555554ull, "333333333.33333325"},
      {0x41b3de4355555555ull, "333333333.3333333"},
      {0x41b3de4355555556ull, "333333333.3333334"},
      {0x41b3de4355555557ull, "333333333.33333343"},
      {0xbecbf647612f3696ull, "-0.0000033333333333333333"},
      {0x43143ff3c1cb0959ull, "1424953923781206.2"},
  };
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
    assert_formats_as(&table[i]);
    /* And through a jansson real, inside an array. */
    json_t *v = json_pack("[f]", from_bits(table[i].bits));
    char *dumped = NULL;
    assert_int_equal(jcs_dump(v, &dumped, NULL, NULL), 0);
    char want[64];
    snprintf(want, sizeof(want), "[%s]", table[i].expected);
    assert_string_equal(dumped, want);
    free(dumped);
    json_decref(v);
  }
  char out[40];
  assert_int_equal(jcs_format_double(from_bits(0x7fffffffffffffffull), out, sizeof(out)), -1);
  assert_int_equal(jcs_format_double(from_bits(0x7ff0000000000000ull), out, sizeof(out)), -1);
  assert_int_equal(jcs_format_double(-INFINITY, out, sizeof(out)), -1);
}

static void assert_number(double d, const char *expected) {
  char out[40];
  assert_true(jcs_format_double(d, out, sizeof(out)) > 0);
  assert_string_equal(out, expected);
}

static void test_number_layout(void **state) {
  (void)state;
  assert_number(1e21, "1e+21");
  assert_number(1e20, "100000000000000000000");
  assert_number(1e-7, "1e-7");
  assert_number(1.5e-7, "1.5e-7");
  assert_number(1e-6, "0.000001");
  assert_number(0.000001234, "0.000001234");
  assert_number(-0.0, "0");
  assert_number(0.1, "0.1");
  assert_number(0.1 + 0.2, "0.30000000000000004");
  assert_number(123.456, "123.456");
  assert_number(1e100, "1e+100");
  assert_number(-1e-7, "-1e-7");
  assert_number(4.35, "4.35");
  assert_number(1.0 / 3, "0.3333333333333333");
  assert_number(123456789012345680000.0, "123456789012345680000");
  assert_number(from_bits(0x0000000000000002ull), "1e-323");
  assert_number(from_bits(0x000FFFFFFFFFFFFFull), "2.225073858507201e-308");
  assert_number(from_bits(0x0010000000000000ull), "2.2250738585072014e-308");
  assert_number(5e-324, "5e-324");
  assert_number(2.0, "2");
  assert_number(-42.5, "-42.5");
  /* Every printed value reads back to the same double, and is no longer than needed. */
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 20000; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    double d = from_bits(x);
    if (!isfinite(d))
      continue;
    char out[40];
    assert_true(jcs_format_double(d, out, sizeof(out)) > 0);
    assert_true(strtod(out, NULL) == d || (d == 0 && strtod(out, NULL) == 0));
  }
}

/* Random doubles (any bits; moderate values; powers of two and their neighbours, where the
 * rounding interval is lopsided; subnormals) against an independent oracle: Python's repr()
 * (David Gay's shortest round-trip digits) laid out by the ECMAScript rules. */
static const struct number_case reference_numbers[] = {
    {0xb3d432ef707050e7ull, "-5.02793897365748e-59"},
    {0xc12d6a593769ec56ull, "-963884.6082300048"},
    {0x7c80000000000000ull, "4.9896007738368e+291"},
    {0x00147b36931e59dbull, "2.8482755338451365e-308"},
    {0x63ec4cb03fa49339ull, "2.187294565561508e+173"},
    {0x41237fad5e5922c2ull, "638934.684273802"},
    {0x14c0000000000001ull, "9.73358881943122e-209"},
    {0x0027a22d463ce3a5ull, "6.573286306124738e-308"},
    {0x4a6bac41e7e229f9ull, "3.235516829508131e+50"},
    {0xc12474128910e766ull, "-670217.2677070915"},
    {0x2d20000000000000ull, "2.4545467326488633e-91"},
    {0x0004cdf8a633cc01ull, "6.68158436351599e-309"},
    {0xabc41e709d10acc3ull, "-7.358609826747707e-98"},
    {0xc122114ebf19d3e0ull, "-592039.3732439242"},
    {0x3770000000000001ull, "1.1479437019748904e-41"},
    {0x000a6f4fe62fab06ull, "1.451139339654598e-308"},
    {0x0f90eba328ef5146ull, "1.0643280237031127e-233"},
    {0x412307498c189bdeull, "623524.7736252507"},
    {0x6140000000000001ull, "2.8118211215894984e+160"},
    {0x002458e2b961bfd0ull, "5.659255504000357e-308"},
    {0x4823ceef40191f0eull, "3.3702140988216215e+39"},
    {0x412a509573668b70ull, "862282.7253917288"},
    {0x47efffffffffffffull, "3.4028236692093843e+38"},
    {0x001d79b57d3bb96dull, "4.0990624294679837e-308"},
    {0xd248eccb95c896d6ull, "-2.4791544896246757e+88"},
    {0x410326d14e763360ull, "156890.1633113874"},
    {0x381fffffffffffffull, "2.3509887016445748e-38"},
    {0x0014a2e774040c49ull, "2.8698368752650394e-308"},
    {0x6dc0bed5446a79d4ull, "4.728936110546973e+220"},
    {0xc1265b3fba186c48ull, "-732575.8634675825"},
    {0x51efffffffffffffull, "4.973232364097866e+86"},
    {0x000998ae65ce845cull, "1.334545216776454e-308"},
    {0x334464a71af63d03ull, "9.91461238273325e-62"},
    {0x412d906ec431dbb6ull, "968759.3831928882"},
    {0x6cd0000000000000ull, "1.3789130657754968e+216"},
    {0x00037ba018d72de8ull, "4.843584771669844e-309"},
    {0x69fc1144e43ab3e7ull, "3.4374799720046436e+202"},
    {0x412bc20d774a0a96ull, "909574.7329867657"},
    {0x00c0000000000000ull, "4.5569512622227484e-305"},
    {0x002524c6f835cfccull, "5.880775930185291e-308"},
    {0xc51fbe241ceb45e5ull, "-9.593654051605373e+24"},
    {0x4109f26ebad308b0ull, "212557.8412228278"},
    {0x27bfffffffffffffull, "3.1724272966445612e-117"},
    {0x7fe70c5a118ff9dfull, "1.2948024876621208e+308"},
    {0xd545030ee7b8373eull, "-5.882674498738154e+102"},
    {0x4113cedcb8902cfcull, "324535.1802374867"},
    {0x29e0000000000000ull, "5.450188595210433e-107"},
    {0x7fe58b04221f8295ull, "1.2102425126633702e+308"},
    {0x128e9984d2360a2dull, "2.708882054686347e-219"},
    {0xc11e7068e6882b7eull, "-498714.2251288219"},
    {0x68d0000000000001ull, "7.475102707912206e+196"},
    {0x0029736ed161972bull, "7.078769230222087e-308"},
    {0x1120b25863152108ull, "3.52405679672173e-226"},
    {0x410a1df96bacd780ull, "213951.17757576331"},
    {0x70bfffffffffffffull, "1.2718228212127406e+235"},
    {0x7fe29537abdc1c04ull, "1.0439474096552093e+308"},
    {0xfe5662ae6c089764ull, "-3.74784813020278e+300"},
    {0xc1218c53bdb4150eull, "-575017.8705145435"},
    {0x4a70000000000001ull, "3.741444191567112e+50"},
    {0x000094e84edec288ull, "8.08911333099503e-310"},
    {0x92db43086c8f850bull, "-7.722864742070962e-218"},
    {0xc11ea782a9ad0ad4ull, "-502240.6656991665"},
    {0x6870000000000001ull, "1.1679847981112822e+195"},
    {0x0022855c1eb7b261ull, "5.151306563486944e-308"},
    {0x6db9c06ba79b3d69ull, "3.6361499194769703e+220"},
    {0x40cbc84854a51600ull, "14224.56508315634"},
    {0x5800000000000001ull, "7.880401239278898e+115"},
    {0x001ebbb14bcd4c31ull, "4.273973888786897e-308"},
    {0x45db48e2c6d28ad4ull, "3.3776835386560787e+28"},
    {0xc12167f003a0a970ull, "-570360.0070851278"},
    {0x1b80000000000001ull, "3.158730165587653e-176"},
    {0x000b0cac5ee58795ull, "1.536622818671881e-308"},
    {0x8b9b2f1cfe155159ull, "-9.269527342652718e-253"},
    {0x4112b2dcc2cd6978ull, "306359.19023670955"},
    {0x4f70000000000001ull, "4.523128485832665e+74"},
    {0x7fe3cfffe46ea47aull, "1.1130247587670574e+308"},
    {0xc37641dabbfe4162ull, "-100237715205002780"},
    {0x412b5f430e085310ull, "896929.5274072606"},
    {0x7ed0000000000000ull, "6.857655085992111e+302"},
    {0x001dffa42fe0d217ull, "4.171818657952886e-308"},
    {0xe8c98ceb07e04f1eull, "-5.968510073096059e+196"},
    {0xc1190eb18143a11aull, "-410540.3762345478"},
    {0x000fffffffffffffull, "2.225073858507201e-308"},
    {0x00263600da78451full, "6.177625672335959e-308"},
    {0xf6c8e9e00cd470e1ull, "-1.5689975517755423e+264"},
    {0xc124e784f6898e67ull, "-684994.481518221"},
    {0x0000200000000000ull, "1.73833895195875e-310"},
    {0x0029954079c7af19ull, "7.115512257077722e-308"},
    {0x0879c2c10f995fc6ull, "7.801938307615334e-268"},
    {0x4118d0384fa0a418ull, "406542.07776123425"},
    {0x179fffffffffffffull, "6.849404215651259e-195"},
    {0x7fe176d1fbf7ffc9ull, "9.810989834478108e+307"},
    {0x11761c6639b1e826ull, "1.4933800592027856e-224"},
    {0xc126bcd63bf6affdull, "-745067.1171164509"},
    {0x2b90000000000001ull, "7.315119304206562e-99"},
    {0x0025a6b2d25008b7ull, "6.021930461930911e-308"},
    {0xa39d7aaece899cdbull, "-3.9607562762180745e-137"},
    {0x41272a34ff885fdeull, "759066.4990873297"},
    {0x1c60000000000001ull, "5.175263503298811e-172"},
    {0x00278c151cdb0623ull, "6.549281603697987e-308"},
    {0x8765bd94e541b0cbull, "-5.023478322288932e-273"},
    {0x412e7cac7450684cull, "998998.2271759599"},
    {0x1be0000000000000ull, "2.0215873059760975e-174"},
    {0x0013b4034648a85cull, "2.740063721598167e-308"},
    {0x47d6d915d33e151aull, "1.2148074797011102e+38"},
    {0x410eaf59052c38b8ull, "251371.12752575218"},
    {0x35c0000000000000ull, "8.552847072295026e-50"},
    {0x00270f231c58b833ull, "6.413533280520079e-308"},
    {0x08b0f84a6a75a1e9ull, "8.223236151251156e-267"},
    {0x41267a3818ef51e2ull, "736540.0487008656"},
    {0x016fffffffffffffull, "9.332636185032188e-302"},
    {0x7fe0067690b5af8eull, "9.002648721754987e+307"},
    {0xa5e67e1ad84bf658ull, "-4.153473365497276e-126"},
    {0xc127b9c1269137d6ull, "-777440.5753266762"},
    {0x1160000000000000ull, "5.403227209783267e-225"},
    {0x0002c66631ad4226ull, "3.859108103097316e-309"},
    {0x04f24b84fc6c5d7cull, "7.689471220642313e-285"},
    {0xc0f2afb71c830d80ull, "-76539.44446091913"},
    {0x323fffffffffffffull, "1.1869459682199747e-66"},
    {0x00119e995e813c71ull, "2.450296909127759e-308"},
    {0x2d73383e3df7a0c5ull, "9.435130239106133e-90"},
    {0x41196bf15c56deb0ull, "416508.34017513227"},
    {0x65efffffffffffffull, "1.0622759856335341e+183"},
    {0x000054e0af898102ull, "4.61081795814055e-310"},
    {0x00db6671754bea20ull, "1.5607654187521635e-304"},
    {0x412cccc2f8194974ull, "943713.4845679239"},
    {0x75ffffffffffffffull, "2.460063114462724e+260"},
    {0x7fe7c079e006d816ull, "1.334329845709346e+308"},
    {0xaa69572a6bbc5d25ull, "-2.2097672842724043e-104"},
    {0xc10c577d600de2ecull, "-232175.67190148623"},
    {0x0eafffffffffffffull, "6.142758149716504e-238"},
    {0x0000c8f87e716621ull, "1.09173487545139e-309"},
    {0xedc5b54622030823ull, "-6.130398134946818e+220"},
    {0xc0cc28a57ec09d40ull, "-14417.292930676253"},
    {0x7980000000000000ull, "1.7726622920963562e+277"},
    {0x000d4d36888f9cbbull, "1.8498170108016174e-308"},
    {0xd110586b68b27ff0ull, "-3.1009451764978185e+82"},
    {0x4114179bc53316e0ull, "329190.9425777029"},
    {0x6e90000000000000ull, "3.701491575958035e+224"},
    {0x001b7ed15a0cf916ull, "3.823703476018789e-308"},
    {0x9c3e1f3a8ecfed04ull, "-1.217884541998459e-172"},
    {0xc1134df47f65719cull, "-316285.12441041484"},
    {0x0280000000000000ull, "1.223247290044539e-296"},
    {0x001f042e1ace7468ull, "4.313351358554048e-308"},
    {0xbf101d622ce0e808ull, "-0.00006147300447958981"},
    {0xc1289fc414a4893dull, "-806882.0403178107"},
    {0x71afffffffffffffull, "4.1675090205499085e+239"},
    {0x7feed2236343f533ull, "1.7314510907391487e+308"},
    {0x5a299c9fc8cbefd4ull, "2.1671477672688615e+126"},
    {0x4125bf1974a7007aull, "712588.7278366231"},
    {0x7000000000000000ull, "3.105036184601418e+231"},
    {0x002f4765e529e654ull, "8.699732434954794e-308"},
    {0xc41cf1339ba15ec1ull, "-133472310142050520000"},
    {0xc11e26130da6461full, "-493956.76332959713"},
    {0x6390000000000001ull, "3.864537523017259e+171"},
    {0x0026c08b8317da7cull, "6.328145873234516e-308"},
    {0xac65860708f6a0a9ull, "-8.061301677892773e-95"},
    {0x410a6fdfe0eefc10ull, "216571.984830827"},
    {0x5e7fffffffffffffull, "1.5983352577617878e+147"},
    {0x7fe16b90bd8ea73full, "9.786291614272578e+307"},
    {0x64f9716cf8905a14ull, "2.577549096605078e+178"},
    {0x40f588ec751f4b50ull, "88206.77859429759"},
    {0x7260000000000000ull, "8.535058474086213e+242"},
    {0x002a73c48416c8ceull, "7.357267164454133e-308"},
    {0x004fae97737c04a8ull, "3.5247393279926303e-307"},
    {0xc0e9309ed5943ea0ull, "-51588.96357166511"},
    {0x0a6fffffffffffffull, "2.0812474159298971e-258"},
    {0x00024ff964142414ull, "3.21578681698583e-309"},
    {0x396fd022afa28171ull, "4.9015732550321575e-32"},
    {0x41243d0549a0b24cull, "663170.6438041418"},
    {0x1b90000000000000ull, "6.317460331175305e-176"},
    {0x001383a5416dac2eull, "2.713789129467714e-308"},
    {0x4c76ebc5724c3fd7ull, "2.302037328438592e+60"},
    {0x4129e20d15c034f0ull, "848134.5424820464"},
    {0x51dfffffffffffffull, "2.486616182048933e+86"},
    {0x0019b9bbf5db6393ull, "3.5775744757104264e-308"},
    {0x1859daacb36bd977ull, "2.266698889730229e-191"},
    {0xc11b31f712ee1ae0ull, "-445565.7684864234"},
    {0x436fffffffffffffull, "72057594037927930"},
    {0x0021b0f81fb708cdull, "4.920552269729412e-308"},
    {0x448cc11c078c9e23ull, "1.697356285801809e+22"},
    {0xc115ea66a87cebcaull, "-359065.664539036"},
    {0x064fffffffffffffull, "2.820616212288796e-278"},
    {0x0011f35fdc02c825ull, "2.4963495021086163e-308"},
    {0x88d62a40f7b049e6ull, "-4.296280536715518e-266"},
    {0x4109a6448e527690ull, "210120.56949322345"},
    {0x3b60000000000001ull, "1.0587911840678757e-22"},
    {0x0028d631c7c8ff60ull, "6.907935677990168e-308"},
    {0xc3569f54baff63ffull, "-25470543004012540"},
    {0x412a489e37ec6e70ull, "861263.1092257034"},
    {0x5fffffffffffffffull, "2.681561585988519e+154"},
    {0x0000908de18dcfe0ull, "7.85263238717764e-310"},
    {0xd64c4366ac757a43ull, "-5.185744480598915e+107"},
    {0xc0fd0474a043e880ull, "-118855.28912726231"},
    {0x650fffffffffffffull, "6.483618076376551e+178"},
    {0x001b6cff32e771b9ull, "3.814022606732462e-308"},
    {0xab03142f21943ac6ull, "-1.703662368775148e-101"},
    {0xc12588355e3adaf2ull, "-705562.68404278"},
    {0x198fffffffffffffull, "1.4708983551653344e-185"},
    {0x001bd0ed451a85c7ull, "3.8683076539136345e-308"},
};

static void test_numbers_against_reference(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof(reference_numbers) / sizeof(reference_numbers[0]); i++)
    assert_formats_as(&reference_numbers[i]);
}

static void test_integers(void **state) {
  (void)state;
  json_t *v = json_pack("[I,I,I,I]", (json_int_t)0, (json_int_t)-7, (json_int_t)9007199254740992LL,
                        (json_int_t)-9007199254740992LL);
  char *out = NULL;
  assert_int_equal(jcs_dump(v, &out, NULL, NULL), 0);
  assert_string_equal(out, "[0,-7,9007199254740992,-9007199254740992]");
  free(out);
  json_decref(v);
  struct cordon_error *err = NULL;
  v = json_pack("{s:I}", "big", (json_int_t)9007199254740993LL);
  assert_true(jcs_dump(v, &out, NULL, &err) < 0);
  assert_non_null(strstr(err->message, "2^53"));
  cordon_error_free(err);
  json_decref(v);
  /* Parsed text: every number is a double, as in JCS. */
  assert_canon("[1, -0, 1.0, 10E-1, 100, 1e2]", "[1,0,1,1,100,100]");
  assert_canon("[9007199254740993]", "[9007199254740992]");
}

static void test_non_finite_rejected(void **state) {
  (void)state;
  /* The formatter refuses them, and jansson cannot even hold them. */
  char out[40];
  assert_int_equal(jcs_format_double(NAN, out, sizeof(out)), -1);
  assert_int_equal(jcs_format_double(-NAN, out, sizeof(out)), -1);
  assert_int_equal(jcs_format_double(INFINITY, out, sizeof(out)), -1);
  assert_null(json_real(NAN));
  assert_null(json_real(INFINITY));
  /* JSON text cannot even spell them. */
  assert_canon_fails("[NaN]", "invalid JSON");
  assert_canon_fails("[Infinity]", "invalid JSON");
  assert_canon_fails("[1e400]", "invalid JSON");
}

static void test_strings(void **state) {
  (void)state;
  /* Every control character, and the characters that are never escaped. */
  json_t *s = json_stringn("\x00\x01\x07\x08\x09\x0a\x0b\x0c\x0d\x1f\x20\x7f/\"\\\xc3\xa9", 17);
  assert_non_null(s);
  char *out = NULL;
  assert_int_equal(jcs_dump(s, &out, NULL, NULL), 0);
  assert_string_equal(
      out, "\"\\u0000\\u0001\\u0007\\b\\t\\n\\u000b\\f\\r\\u001f \x7f/\\\"\\\\\xc3\xa9\"");
  free(out);
  json_decref(s);
  assert_canon("\"\\u00e9\\u0041\\/\"", "\"\xc3\xa9"
                                        "A/\"");
  assert_canon("\"\\ud83d\\ude00\"", "\"\xf0\x9f\x98\x80\"");
  /* A lone surrogate has no UTF-8 form. */
  assert_canon_fails("\"\\ud83d\"", NULL);
  assert_canon_fails("\"\xff\"", NULL);
}

static void test_key_order(void **state) {
  (void)state;
  /* U+10000 and above (surrogates D800..) sort before U+E000..U+FFFF in UTF-16. */
  assert_true(jcs_compare_keys("\xf0\x9f\x98\x80", 4, "\xef\xac\xb3", 3) < 0);
  assert_true(jcs_compare_keys("\xee\x80\x80", 3, "\xf0\x90\x80\x80", 4) > 0);
  /* ... but after U+D7FF. */
  assert_true(jcs_compare_keys("\xed\x9f\xbf", 3, "\xf0\x90\x80\x80", 4) < 0);
  assert_true(jcs_compare_keys("a", 1, "ab", 2) < 0);
  assert_true(jcs_compare_keys("b", 1, "ab", 2) > 0);
  assert_int_equal(jcs_compare_keys("abc", 3, "abc", 3), 0);
  assert_canon("{\"b\":1,\"a\":{\"d\":[],\"c\":{}},\"\":0}",
               "{\"\":0,\"a\":{\"c\":{},\"d\":[]},\"b\":1}");
  /* More members than the small-object path holds. */
  char text[4096] = "{", expected[4096] = "{";
  for (int i = 39; i >= 0; i--)
    snprintf(text + strlen(text), sizeof(text) - strlen(text), "%s\"k%02d\":%d", i == 39 ? "" : ",",
             i, i);
  strcat(text, "}");
  for (int i = 0; i < 40; i++)
    snprintf(expected + strlen(expected), sizeof(expected) - strlen(expected), "%s\"k%02d\":%d",
             i ? "," : "", i, i);
  strcat(expected, "}");
  assert_canon(text, expected);
}

static void test_rejections(void **state) {
  (void)state;
  assert_canon_fails("{\"a\":1,\"a\":2}", "invalid JSON");
  assert_canon_fails("{\"a\":1} x", "invalid JSON");
  assert_canon_fails("", "invalid JSON");
  assert_canon_fails("[1,]", "invalid JSON");
  struct cordon_error *err = NULL;
  char *out = NULL;
  assert_true(jcs_canonicalize("[1]", 3, 2, "tiny", &out, NULL, &err) < 0);
  assert_non_null(strstr(err->message, "larger than"));
  cordon_error_free(err);
  /* Scalars are fine at the top level. */
  assert_canon(" \"x\" ", "\"x\"");
  assert_canon("null", "null");
  assert_canon("[[],{},[{}]]", "[[],{},[{}]]");
}

static void test_serialize_without(void **state) {
  (void)state;
  json_t *o = json_pack("{s:i, s:s, s:[i]}", "z", 1, "m", "x", "a", 2);
  struct jcs_buf b = {0};
  size_t offset = 0;
  bool first = true;
  assert_int_equal(jcs_serialize_without(o, "m", &b, &offset, &first, NULL), 0);
  assert_string_equal(b.data, "{\"a\":[2],\"z\":1}");
  assert_false(first);
  assert_int_equal(offset, strlen("{\"a\":[2]"));
  b.length = 0;
  assert_int_equal(jcs_serialize_without(o, "a", &b, &offset, &first, NULL), 0);
  assert_string_equal(b.data, "{\"m\":\"x\",\"z\":1}");
  assert_true(first);
  assert_int_equal(offset, 1);
  b.length = 0;
  struct cordon_error *err = NULL;
  assert_true(jcs_serialize_without(o, "q", &b, &offset, &first, &err) < 0);
  cordon_error_free(err);
  jcs_buf_free(&b);
  json_decref(o);
}

static void test_public_canonicalize(void **state) {
  (void)state;
  char *out = NULL;
  size_t length = 0;
  const char *text = "{ \"b\" : 2.50, \"a\" : \"\\u0041\" }";
  assert_int_equal(cordon_json_canonicalize(text, strlen(text), &out, &length, NULL), 0);
  assert_string_equal(out, "{\"a\":\"A\",\"b\":2.5}");
  assert_int_equal(length, strlen(out));
  free(out);
}

/* The checker agrees with parse + serialise: canonical texts pass, anything else fails, and
 * the reason points at the first offending byte. */
static bool reserializes_to_itself(const char *text, size_t length) {
  json_t *v = NULL;
  if (jcs_parse(text, length, 0, "t", &v, NULL) < 0)
    return false;
  char *out = NULL;
  size_t n = 0;
  bool same = jcs_dump(v, &out, &n, NULL) == 0 && n == length && !memcmp(out, text, n);
  free(out);
  json_decref(v);
  return same;
}

static void expect_canonical(const char *text, size_t length, bool canonical, const char *reason) {
  struct jcs_check check;
  int r = jcs_check_canonical(text, length, NULL, 0, &check);
  if ((r == 0) != canonical)
    fail_msg("'%.*s': checker says %s (%s)", (int)length, text, r == 0 ? "canonical" : "not",
             check.reason ? check.reason : "");
  if (reserializes_to_itself(text, length) != canonical)
    fail_msg("'%.*s': parse+serialise disagrees", (int)length, text);
  if (reason && (!check.reason || !strstr(check.reason, reason)))
    fail_msg("'%.*s': reason '%s', want '%s'", (int)length, text, check.reason, reason);
}

#define CANON(t) expect_canonical(t, sizeof(t) - 1, true, NULL)
#define NOT_CANON(t, why) expect_canonical(t, sizeof(t) - 1, false, why)

static void test_check_canonical(void **state) {
  (void)state;
  CANON("{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],"
        "\"string\":\"\xe2\x82\xac$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}");
  CANON("{\"\\r\":1,\"1\":2,\"\xc2\x80\":3,\"\xc3\xb6\":4,\"\xe2\x82\xac\":5,"
        "\"\xf0\x9f\x98\x80\":6,\"\xef\xac\xb3\":7}");
  CANON("0");
  CANON("-5e-324");
  CANON("123456789012345");
  CANON("1234567890123456");
  CANON("9007199254740992");
  CANON("\"\\u0000\\u001f\x7f\"");
  CANON("[{},[],\"\",{\"\":null}]");
  CANON("{\"a\":{\"b\":[1,{\"c\":true}]},\"b\":0.5}");
  NOT_CANON("", "expected a value");
  NOT_CANON(" 1", "expected a value");
  NOT_CANON("1 ", "bytes after the value");
  NOT_CANON("{\"a\": 1}", "expected a value");
  NOT_CANON("{\"b\":1,\"a\":2}", "members out of order");
  NOT_CANON("{\"a\":1,\"a\":1}", "duplicate member name");
  NOT_CANON("{\"\xef\xac\xb3\":1,\"\xf0\x9f\x98\x80\":2}", "members out of order");
  NOT_CANON("\"\\/\"", "escape");
  NOT_CANON("\"\\u000a\"", "short escape");
  NOT_CANON("\"\\u001F\"", "escape");
  NOT_CANON("\"\\u0041\"", "escape");
  NOT_CANON("\"\\u00e9\"", "escape");
  NOT_CANON("\"\x01\"", "control");
  NOT_CANON("\"\xc0\x80\"", "UTF-8");
  NOT_CANON("\"\xe0\x80\x80\"", "UTF-8");
  NOT_CANON("\"\xed\xa0\x80\"", "UTF-8");
  NOT_CANON("\"\xf4\x90\x80\x80\"", "UTF-8");
  NOT_CANON("\"\xe2\x82\"", "UTF-8");
  NOT_CANON("\"abc", "unterminated");
  NOT_CANON("1.0", "number");
  NOT_CANON("1E30", "number");
  NOT_CANON("1e30", "number");
  NOT_CANON("-0", "number");
  NOT_CANON("01", "bytes after");
  NOT_CANON("1e400", "out of range");
  NOT_CANON("0.10", "number");
  NOT_CANON("1e21", "number");
  NOT_CANON("100000000000000000000000", "number");
  NOT_CANON("9007199254740993", "number");
  NOT_CANON("tru", "literal");
  NOT_CANON("nul", "literal");
  NOT_CANON("[1,]", "expected a value");
  NOT_CANON("{\"a\":1,}", "member name");
  NOT_CANON("{\"\\u0000\":1}", "NUL");
  NOT_CANON("{1:2}", "member name");

  /* Depth: jansson's bound, exactly. */
  char deep[2 * 2049 + 1];
  for (int d = 2048; d <= 2049; d++) {
    memset(deep, '[', (size_t)d);
    memset(deep + d, ']', (size_t)d);
    expect_canonical(deep, 2 * (size_t)d, d == 2048, d == 2048 ? NULL : "deep");
  }

  /* Top-level members are described. */
  const char *obj = "{\"a\":[1,2],\"bb\":\"x\",\"c\":{}}";
  struct jcs_span m[2];
  struct jcs_check check;
  assert_int_equal(jcs_check_canonical(obj, strlen(obj), m, 2, &check), 0);
  assert_int_equal(check.type, 'o');
  assert_int_equal(check.n_members, 3);
  assert_int_equal(m[0].key_start, 1);
  assert_int_equal(m[0].key_length, 1);
  assert_int_equal(m[0].type, 'a');
  assert_memory_equal(obj + m[0].value_start, "[1,2]", m[0].value_end - m[0].value_start);
  assert_int_equal(m[1].key_length, 2);
  assert_int_equal(m[1].type, 's');
  char decoded[16];
  assert_int_equal(jcs_decode_string("a\\n\\\"\\u001fb", 12, decoded), 5);
  assert_memory_equal(decoded,
                      "a\n\"\x1f"
                      "b",
                      5);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rfc_sample),
      cmocka_unit_test(test_rfc_sorting),
      cmocka_unit_test(test_rfc_numbers),
      cmocka_unit_test(test_number_layout),
      cmocka_unit_test(test_numbers_against_reference),
      cmocka_unit_test(test_integers),
      cmocka_unit_test(test_non_finite_rejected),
      cmocka_unit_test(test_strings),
      cmocka_unit_test(test_key_order),
      cmocka_unit_test(test_rejections),
      cmocka_unit_test(test_serialize_without),
      cmocka_unit_test(test_public_canonicalize),
      cmocka_unit_test(test_check_canonical),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
