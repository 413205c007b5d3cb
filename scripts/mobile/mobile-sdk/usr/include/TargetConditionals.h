/* Stand-in for the one Apple SDK header that the C code of our dependencies includes
 * (ring, rustls's cryptography, for model downloads): scripts/mobile/build-mobile.sh points SDKROOT
 * here, since no Xcode SDK exists on the machines that build the iOS libraries. Every
 * target it is used for is iOS (device or simulator). */
#ifndef LOCAL_LLM_TARGET_CONDITIONALS_H
#define LOCAL_LLM_TARGET_CONDITIONALS_H
#define TARGET_OS_MAC 1
#define TARGET_OS_OSX 0
#define TARGET_OS_IPHONE 1
#define TARGET_OS_IOS 1
#endif
